"""Job webhooks: a POST with a JSON body to a job's `webhook` URL when it ends.

The controller only enqueues (never blocks its cycle); one background thread sends
(`retryqueue.RetryQueue`, which job e-mails share). The queue is bounded: when it is full
the oldest notification is dropped and counted (`gpuyard_webhook_dropped_total`). A failed
POST (a connection error or a non-2xx answer) is tried again with exponential backoff, at
most `max_attempts` times in all.

Each send first checks where the URL's host resolves (`webhookguard`): an address the job's
tenant may not reach (loopback, link-local, private, unless a platform admin allowed them) is
refused for good (`gpuyard_webhook_deliveries{outcome="refused"}`), and the POST goes to the
address checked, with the URL's host name in `Host` and in TLS (SNI and certificate).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from gpuyard import __version__
from gpuyard.controller.retryqueue import RetryQueue
from gpuyard.controller.webhookguard import PrivatePolicy, WebhookRefused, checked_address
from gpuyard.metrics import Instruments
from gpuyard.store import JobRecord

log = logging.getLogger("gpuyard.webhooks")

USER_AGENT = f"gpuyard/{__version__}"


@dataclass(frozen=True, slots=True)
class Delivery:
    url: str
    body: dict[str, Any]


def job_payload(job: JobRecord) -> dict[str, Any]:
    """What a webhook receives: the ended job, its state and why, and its times (ISO 8601)."""
    return {
        "event": "job.ended",
        "id": job.id,
        "name": job.name,
        "tenant": job.tenant,
        "owner": job.owner,
        "state": str(job.state),
        "reason": job.reason,
        "message": job.message,
        "attempt": job.attempt,
        "submittedAt": _iso(job.submitted_at),
        "startedAt": _iso(job.started_at),
        "finishedAt": _iso(job.finished_at),
    }


def _nobody(_tenant: str | None) -> bool:
    return False


def _iso(t: float | None) -> str | None:
    return datetime.fromtimestamp(t, UTC).isoformat() if t is not None else None


class WebhookDispatcher(RetryQueue[Delivery]):
    thread_name = "gpuyard-webhooks"

    def __init__(
        self,
        instruments: Instruments,
        *,
        max_queue: int = 1000,
        max_attempts: int = 5,
        backoff_s: float = 1.0,
        max_backoff_s: float = 60.0,
        timeout_s: float = 5.0,
        private_allowed: PrivatePolicy | None = None,
    ) -> None:
        super().__init__(
            max_queue=max_queue,
            max_attempts=max_attempts,
            backoff_s=backoff_s,
            max_backoff_s=max_backoff_s,
        )
        self._metrics = instruments
        self._private_allowed = private_allowed or _nobody
        self._timeout_s = timeout_s

    def allow_private_for(self, policy: PrivatePolicy) -> None:
        """Which tenants' webhooks may reach private addresses (none until this is called;
        the API sets it from the tenants' `allowPrivateWebhooks`)."""
        self._private_allowed = policy

    def enqueue(self, url: str, body: dict[str, Any]) -> None:
        """Queue a notification; never blocks (a full queue drops its oldest)."""
        self.put(Delivery(url, body))

    @contextmanager
    def _connection(self) -> Iterator[httpx.Client]:
        with httpx.Client(timeout=self._timeout_s, headers={"User-Agent": USER_AGENT}) as http:
            yield http

    def _dropped(self, d: Delivery) -> None:
        self._metrics.webhook_dropped.inc()
        log.warning("webhook queue full: dropped the notification for %s", d.url)

    def _queued(self, length: int) -> None:
        self._metrics.webhook_queue.set(length)

    def _retrying(self, d: Delivery, attempt: int, problem: str, delay: float) -> None:
        log.info("webhook %s: try %d failed (%s), again in %.1fs", d.url, attempt, problem, delay)

    def _gave_up(self, d: Delivery, attempts: int, problem: str) -> None:
        self._metrics.webhook_deliveries.labels("failed").inc()
        log.warning("webhook %s failed %d times, giving up: %s", d.url, attempts, problem)

    def _attempt(self, http: httpx.Client, d: Delivery) -> str | None:
        try:
            answer = self._post(http, d)
            if answer.is_success:
                self._metrics.webhook_deliveries.labels("delivered").inc()
                return None
            return f"HTTP {answer.status_code}"
        except WebhookRefused as e:
            self._metrics.webhook_deliveries.labels("refused").inc()
            log.warning("webhook %s refused, not sent: %s", d.url, e)
            return None
        except (httpx.HTTPError, OSError) as e:  # OSError: the name did not resolve
            return f"{type(e).__name__}: {e}"

    def _post(self, http: httpx.Client, d: Delivery) -> httpx.Response:
        """POST to the address `d.url`'s host resolves to now, once it passed the guard."""
        url = httpx.URL(d.url)
        port = url.port or (443 if url.scheme == "https" else 80)
        tenant = d.body.get("tenant")
        ip = checked_address(url.host, port, self._private_allowed(tenant))
        self._metrics.webhook_attempts.inc()
        return http.post(
            url.copy_with(host=str(ip)),
            json=d.body,
            headers={"Host": url.netloc.decode("ascii")},
            extensions={"sni_hostname": url.host} if url.scheme == "https" else {},
        )
