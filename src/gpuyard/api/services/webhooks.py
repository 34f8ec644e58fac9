"""A job's webhook at submit: refused (422 at `webhook`) when its host is, or resolves to, an
address the tenant's webhooks may not reach (`gpuyard.controller.webhookguard`); each send
checks again, on what the name resolves to then."""

from __future__ import annotations

from urllib.parse import urlsplit

from gpuyard.controller.webhookguard import WebhookRefused, check_at_submit
from gpuyard.model import Tenant
from gpuyard.spec import FieldError, JobSpec

DEFAULT_PORTS = {"http": 80, "https": 443}


def webhook_errors(spec: JobSpec, tenant: Tenant) -> list[FieldError]:
    if not spec.webhook:
        return []
    url = urlsplit(spec.webhook)  # the spec checked its form: a scheme, a host, a port
    port = url.port or DEFAULT_PORTS.get(url.scheme, 80)
    try:
        check_at_submit(url.hostname or "", port, tenant.allow_private_webhooks)
    except WebhookRefused as e:
        return [FieldError("webhook", str(e))]
    return []
