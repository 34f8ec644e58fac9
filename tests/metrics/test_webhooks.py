"""Job webhooks against a real HTTP server on 127.0.0.1 that fails the first POST: the
controller enqueues on an end state, the worker retries with backoff, and a full queue drops
its oldest notification. 127.0.0.1 is a private address: the tenant is allowed them
(`allow_private_webhooks`; tests/security/test_webhooks_ssrf.py without)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gpuyard.controller.webhookguard import private_webhooks_of
from gpuyard.controller.webhooks import WebhookDispatcher
from gpuyard.metrics import Instruments
from metrics.conftest import TENANTS, make_rig

HOLD_S = 10.0


class Receiver(ThreadingHTTPServer):
    """Answers 503 to the first `failures` POSTs, then 204; keeps every body it got."""

    def __init__(self, failures: int) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.failures = failures
        self.bodies: list[dict] = []
        self.answers: list[int] = []
        self.got = threading.Event()
        self.release = threading.Event()  # POSTs are answered once it is set
        self.release.set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hook"


class Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.release.wait(HOLD_S)
        code = 503 if len(self.server.answers) < self.server.failures else 204
        self.server.answers.append(code)
        self.send_response(code)
        self.end_headers()
        if code == 204:
            self.server.bodies.append(body)
            self.server.got.set()

    def log_message(self, *args) -> None:
        return None


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver(failures=1)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.release.set()  # a test that failed while holding a POST
    server.shutdown()
    server.server_close()


def test_an_ended_job_is_posted_after_a_failed_attempt(tmp_path, receiver):
    instruments = Instruments()
    hooks = WebhookDispatcher(instruments, backoff_s=0.05, timeout_s=2 * HOLD_S)  # outlasts a hold
    tenants = [replace(TENANTS[0], allow_private_webhooks=True), *TENANTS[1:]]
    rig = make_rig(tmp_path, tenants, instruments=instruments, webhooks=hooks)
    hooks.allow_private_for(private_webhooks_of(rig.store))  # as the API sets it
    hooks.start()
    try:
        job = rig.submit("red", webhook=receiver.url)
        (key,) = rig.start(job)
        rig.engine.exit(key, 0, "Completed")
        receiver.release.clear()  # the receiver holds every POST until released
        rig.ctl.run_cycle()
        assert receiver.answers == [], "the cycle waited for the POST"
        receiver.release.set()
        assert receiver.got.wait(10), f"no delivery; answers {receiver.answers}"
    finally:
        hooks.stop()
        rig.store.close()
    assert receiver.answers == [503, 204]
    (body,) = receiver.bodies
    assert body["id"] == job and body["state"] == "SUCCEEDED" and body["reason"] == "Completed"
    assert body["tenant"] == "red" and body["name"] == "t" and body["event"] == "job.ended"
    assert body["submittedAt"] and body["startedAt"] and body["finishedAt"]
    assert instruments.webhook_attempts._value.get() == 2
    assert instruments.webhook_deliveries.labels("delivered")._value.get() == 1


def test_a_job_without_webhook_posts_nothing(tmp_path):
    rig = make_rig(tmp_path, TENANTS)
    job = rig.submit("red")
    (key,) = rig.start(job)
    rig.engine.exit(key, 1, "Error(exit 1)")
    rig.ctl.run_cycle()
    assert len(rig.ctl.webhooks) == 0
    rig.store.close()


def test_attempts_are_bounded(receiver):
    receiver.failures = 100
    instruments = Instruments()
    hooks = WebhookDispatcher(
        instruments, max_attempts=3, backoff_s=0.01, private_allowed=lambda _tenant: True
    )
    hooks.enqueue(receiver.url, {"id": "x"})
    hooks.start()
    deadline = time.monotonic() + 10
    while instruments.webhook_deliveries.labels("failed")._value.get() < 1:
        assert time.monotonic() < deadline, receiver.answers
        time.sleep(0.02)
    hooks.stop()
    assert receiver.answers == [503, 503, 503]


def test_a_full_queue_drops_its_oldest():
    instruments = Instruments()
    hooks = WebhookDispatcher(instruments, max_queue=2)  # not started: nothing is sent
    for i in range(3):
        hooks.enqueue("http://127.0.0.1:9/x", {"id": i})
    assert len(hooks) == 2
    assert instruments.webhook_dropped._value.get() == 1
    assert instruments.webhook_queue._value.get() == 2
