"""Where a job's webhook may be posted: public addresses only (no server-side request forgery).

The platform POSTs from the control plane, so a webhook could otherwise reach what tenants
cannot: the API itself on 127.0.0.1, a cloud's metadata service on 169.254.169.254, services
of the machine's private network. Refused, unless a platform admin allowed the tenant private
webhooks (`allowPrivateWebhooks`): loopback, link-local (169.254.0.0/16, fe80::/10), private
(10/8, 172.16/12, 192.168/16, fc00::/7), shared (100.64/10), unspecified, multicast,
broadcast and every other address that is not global (IPv4-mapped IPv6 judged as its IPv4).

Checked at submit (a literal address, or a name that resolves to a refused one: 422) and again
at each send, on what the name resolves to then; the POST then goes to the address checked,
never to a second lookup, so a name that changes its answer (DNS rebinding) gains nothing.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as LookupTimeout

from gpuyard.store import Store

log = logging.getLogger("gpuyard.webhooks")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
PrivatePolicy = Callable[[str | None], bool]  # tenant → may its webhooks reach private ones?

ALLOW_HINT = (
    "a platform admin may allow private webhooks for the tenant "
    "(`gpuyard admin tenant update TENANT --allow-private-webhooks`)"
)
_LOOKUPS = ThreadPoolExecutor(4, thread_name_prefix="gpuyard-webhook-dns")


class WebhookRefused(Exception):
    """The webhook's host is, or resolves to, an address it may not reach."""


def address_problem(ip: IPAddress) -> str | None:
    """Why a webhook may not be posted to `ip` (None: a public address)."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    checks = (
        (ip.is_loopback, "a loopback address"),
        (ip.is_link_local, "a link-local address (where cloud metadata services answer)"),
        (ip.is_unspecified, "the unspecified address"),
        (ip.is_multicast, "a multicast address"),
        (ip.is_private, "a private address"),
        (not ip.is_global, "not a public address"),
    )
    return next((words for bad, words in checks if bad), None)


def resolve(host: str, port: int) -> list[IPAddress]:
    """The addresses `host` stands for (itself if it is one); OSError if it resolves to none."""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(ipaddress.ip_address(info[4][0]) for info in infos))


def checked_address(host: str, port: int, allow_private: bool) -> IPAddress:
    """The address to connect to: `host`'s first, once every address it resolves to passed
    (all of them: a name with one private address among public ones is refused)."""
    addresses = resolve(host, port)
    if not allow_private:
        for ip in addresses:
            if problem := address_problem(ip):
                shown = host if str(ip) == host else f"{host} resolves to {ip}, which"
                raise WebhookRefused(f"{shown} is {problem}; {ALLOW_HINT}")
    return addresses[0]


def check_at_submit(host: str, port: int, allow_private: bool, timeout_s: float = 2.0) -> None:
    """Refuse (`WebhookRefused`) a webhook whose host is or resolves to a refused address. A
    name that does not resolve now, or not within `timeout_s`, passes: each send checks again."""
    if allow_private:
        return
    lookup = _LOOKUPS.submit(checked_address, host, port, allow_private)
    try:
        lookup.result(timeout_s)
    except (OSError, LookupTimeout):
        return


def private_webhooks_of(store: Store) -> PrivatePolicy:
    """The tenants' `allowPrivateWebhooks`, read from the store at each send."""

    def allowed(tenant: str | None) -> bool:
        try:
            record = store.tenants.get(tenant) if tenant else None
        except Exception:  # the store cannot answer: refuse (the send is not retried)
            log.exception("could not read tenant %s's webhook permission", tenant)
            return False
        return record is not None and record.tenant.allow_private_webhooks

    return allowed
