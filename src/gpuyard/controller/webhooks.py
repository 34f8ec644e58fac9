"""Job webhooks: a POST with a JSON body to a job's `webhook` URL when it ends.

The controller only enqueues (never blocks its cycle); one background thread sends. The
queue is bounded: when it is full the oldest notification is dropped and counted
(`gpuyard_webhook_dropped_total`). A failed POST (a connection error or a non-2xx answer) is
tried again with exponential backoff, at most `max_attempts` times in all.

Each send first checks where the URL's host resolves (`webhookguard`): an address the job's
tenant may not reach (loopback, link-local, private, unless a platform admin allowed them) is
refused for good (`gpuyard_webhook_deliveries{outcome="refused"}`), and the POST goes to the
address checked, with the URL's host name in `Host` and in TLS (SNI and certificate).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import httpx

from gpuyard import __version__
from gpuyard.controller.webhookguard import PrivatePolicy, WebhookRefused, checked_address
from gpuyard.metrics import Instruments
from gpuyard.store import JobRecord

log = logging.getLogger("gpuyard.webhooks")

USER_AGENT = f"gpuyard/{__version__}"


@dataclass(frozen=True, slots=True)
class Delivery:
    url: str
    body: dict[str, Any]
    attempt: int = 0  # attempts made so far
    due: float = 0.0  # monotonic time of the next attempt


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


class WebhookDispatcher:
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
        self._metrics = instruments
        self._private_allowed = private_allowed or _nobody
        self._max_queue = max_queue
        self._max_attempts = max_attempts
        self._backoff_s = backoff_s
        self._max_backoff_s = max_backoff_s
        self._timeout_s = timeout_s
        self._queue: deque[Delivery] = deque()
        self._cond = threading.Condition()
        self._halt = False
        self._thread: threading.Thread | None = None

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue)

    def allow_private_for(self, policy: PrivatePolicy) -> None:
        """Which tenants' webhooks may reach private addresses (none until this is called;
        the API sets it from the tenants' `allowPrivateWebhooks`)."""
        self._private_allowed = policy

    def enqueue(self, url: str, body: dict[str, Any]) -> None:
        """Queue a notification; never blocks (a full queue drops its oldest)."""
        self._put(Delivery(url, body, 0, time.monotonic()))

    def start(self) -> None:
        with self._cond:
            if self._thread is not None:
                return
            self._halt = False
            self._thread = threading.Thread(target=self._run, name="gpuyard-webhooks", daemon=True)
            self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        with self._cond:
            self._halt = True
            self._cond.notify_all()
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout_s)

    def _put(self, d: Delivery) -> None:
        with self._cond:
            if len(self._queue) >= self._max_queue:
                dropped = self._queue.popleft()
                self._metrics.webhook_dropped.inc()
                log.warning("webhook queue full: dropped the notification for %s", dropped.url)
            self._queue.append(d)
            self._metrics.webhook_queue.set(len(self._queue))
            self._cond.notify_all()

    def _run(self) -> None:
        with httpx.Client(timeout=self._timeout_s, headers={"User-Agent": USER_AGENT}) as http:
            while (d := self._next()) is not None:
                self._send(http, d)

    def _next(self) -> Delivery | None:
        """The next due delivery (waiting for one), or None once stopped."""
        with self._cond:
            while not self._halt:
                now = time.monotonic()
                due = [d for d in self._queue if d.due <= now]
                if due:
                    self._queue.remove(due[0])
                    self._metrics.webhook_queue.set(len(self._queue))
                    return due[0]
                wait = min((d.due for d in self._queue), default=now + 60) - now
                self._cond.wait(max(0.01, wait))
            return None

    def _send(self, http: httpx.Client, d: Delivery) -> None:
        attempt = d.attempt + 1
        try:
            answer = self._post(http, d)
            if answer.is_success:
                self._metrics.webhook_deliveries.labels("delivered").inc()
                return
            problem = f"HTTP {answer.status_code}"
        except WebhookRefused as e:
            self._metrics.webhook_deliveries.labels("refused").inc()
            log.warning("webhook %s refused, not sent: %s", d.url, e)
            return
        except (httpx.HTTPError, OSError) as e:  # OSError: the name did not resolve
            problem = f"{type(e).__name__}: {e}"
        if attempt >= self._max_attempts:
            self._metrics.webhook_deliveries.labels("failed").inc()
            log.warning("webhook %s failed %d times, giving up: %s", d.url, attempt, problem)
            return
        delay = min(self._max_backoff_s, self._backoff_s * 2 ** (attempt - 1))
        log.info("webhook %s: try %d failed (%s), again in %.1fs", d.url, attempt, problem, delay)
        self._put(replace(d, attempt=attempt, due=time.monotonic() + delay))

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
