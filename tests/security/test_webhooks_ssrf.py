"""Webhooks cannot be aimed at the control plane's neighbours (issue 15, item 7): a job's
webhook to loopback, link-local (169.254.169.254: cloud metadata), private, unspecified or
multicast addresses is refused at submit (422 at `webhook`) and again at send time, on what the
name resolves to then, unless a platform admin allowed the tenant private webhooks; the POST
goes to the address that was checked (a second DNS answer is never used)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gpuyard.controller.webhooks import WebhookDispatcher
from gpuyard.metrics import Instruments

REFUSED = [
    "http://127.0.0.1:8080/api/v1/jobs",
    "http://localhost/x",
    "http://[::1]/x",
    "http://169.254.169.254/latest/meta-data/iam/",
    "http://[fe80::1]/x",
    "http://10.1.2.3/x",
    "http://172.16.0.1/x",
    "https://192.168.1.1/x",
    "http://[fc00::1]/x",
    "http://100.64.0.1/x",
    "http://0.0.0.0:8080/x",
    "http://[::]/x",
    "http://224.0.0.1/x",
    "http://[::ffff:127.0.0.1]/x",
    "http://255.255.255.255/x",
]


class Receiver(ThreadingHTTPServer):
    """A webhook receiver on 127.0.0.1: keeps each POST's body and Host header, answers 204."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.posts: list[tuple[str, dict]] = []
        self.got = threading.Event()

    def url(self, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.server_address[1]}/hook"


class Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.posts.append((self.headers["Host"], body))
        self.send_response(204)
        self.end_headers()
        self.server.got.set()

    def log_message(self, *args) -> None:
        return None


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def job(webhook: str) -> str:
    return json.dumps(
        {"name": "hook", "tenant": "red", "webhook": webhook, "taskRoles": {"m": {"command": "x"}}}
    )


def submit(w, webhook: str, who: str = "alice"):
    return w.call(
        who,
        "POST",
        "/api/v1/jobs",
        content=job(webhook),
        headers={"Content-Type": "application/json"},
    )


def allow_private(w, allowed: bool, who: str = "root"):
    body = {"allowPrivateWebhooks": allowed}
    return w.call(who, "PATCH", "/api/v1/tenants/red", json=body)


@pytest.mark.parametrize("url", REFUSED)
def test_a_webhook_to_a_private_address_is_refused_at_submit(shared_world, url):
    r = submit(shared_world, url)
    assert r.status_code == 422, r.text
    (error,) = r.json()["errors"]
    assert error["path"] == "webhook"
    assert "allow-private-webhooks" in error["message"]


@pytest.mark.parametrize(
    "url",
    [
        "https://93.184.215.14/hook",  # a public address
        "https://[2606:2800:21f:cb07:6820:80da:af6b:8b2c]/hook",
        "https://hooks.invalid/x",  # resolves to nothing now: each send checks again
    ],
)
def test_a_webhook_to_a_public_address_or_an_unresolved_name_is_accepted(shared_world, url):
    assert submit(shared_world, url).status_code == 201


def test_a_platform_admin_allows_a_tenant_private_webhooks(world):
    assert allow_private(world, True, who="redboss").status_code == 403  # not a tenant admin's
    assert submit(world, REFUSED[0]).status_code == 422
    r = allow_private(world, True)
    assert r.status_code == 200 and r.json()["allowPrivateWebhooks"] is True
    assert submit(world, REFUSED[0]).status_code == 201
    assert submit(world, REFUSED[0], who="bob").status_code == 403  # blue's bob: not red's


def run_to_the_end(w, job_id: str) -> None:
    """Start the job on the fake engine, let its task exit 0, observe it (webhook enqueued)."""
    w.ctl.run_cycle()
    for key in w.engine.keys_on(job_id):
        w.engine.run(key)
        w.engine.exit(key, 0, "Completed")
    w.ctl.run_cycle()
    assert w.store.jobs.get(job_id).state.is_final


def wait_for(what, deadline_s: float = 20.0) -> None:
    deadline = time.monotonic() + deadline_s
    while not what():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def deliveries(w, outcome: str) -> float:
    return w.ctl.instruments.webhook_deliveries.labels(outcome)._value.get()


def test_a_permission_revoked_after_submit_is_checked_at_send_time(world, receiver):
    assert allow_private(world, True).status_code == 200
    r = submit(world, receiver.url("localhost"))
    assert r.status_code == 201, r.text
    assert allow_private(world, False).status_code == 200  # before the job ends
    run_to_the_end(world, r.json()["id"])
    world.ctl.webhooks.start()
    try:
        wait_for(lambda: deliveries(world, "refused") == 1)
    finally:
        world.ctl.webhooks.stop()
    assert receiver.posts == []
    assert deliveries(world, "delivered") == 0


def test_an_allowed_private_webhook_is_delivered_with_its_host_name(world, receiver):
    assert allow_private(world, True).status_code == 200
    r = submit(world, receiver.url("localhost"))
    run_to_the_end(world, r.json()["id"])
    world.ctl.webhooks.start()
    try:
        assert receiver.got.wait(20)
    finally:
        world.ctl.webhooks.stop()
    ((host, body),) = receiver.posts
    assert host == f"localhost:{receiver.server_address[1]}"  # sent to the address, named
    assert body["id"] == r.json()["id"] and body["tenant"] == "red"


def test_the_post_goes_to_the_address_checked_not_to_a_second_answer(receiver, monkeypatch):
    """DNS rebinding: `rebind.test` answers 127.0.0.1 once, then 127.0.0.2 (where nothing
    listens). The POST reaches the receiver only if it goes to the first, checked, answer."""
    real, answers = socket.getaddrinfo, ["127.0.0.1", "127.0.0.2"]
    lookups: list[str] = []

    def rebinding(host, port, *args, **kwargs):
        if host != "rebind.test":
            return real(host, port, *args, **kwargs)
        lookups.append(host)
        ip = answers[min(len(lookups), len(answers)) - 1]
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port))]

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    instruments = Instruments()
    hooks = WebhookDispatcher(instruments, max_attempts=1, private_allowed=lambda _t: True)
    hooks.enqueue(receiver.url("rebind.test"), {"id": "j", "tenant": "red"})
    hooks.start()
    try:
        assert receiver.got.wait(20)
    finally:
        hooks.stop()
    assert lookups == ["rebind.test"]
    ((host, _),) = receiver.posts
    assert host == f"rebind.test:{receiver.server_address[1]}"


def test_a_dispatcher_without_a_policy_refuses_private_addresses(receiver):
    instruments = Instruments()
    hooks = WebhookDispatcher(instruments, max_attempts=1)
    hooks.enqueue(receiver.url(), {"id": "j", "tenant": "red"})
    hooks.start()
    try:
        wait_for(lambda: instruments.webhook_deliveries.labels("refused")._value.get() == 1)
    finally:
        hooks.stop()
    assert receiver.posts == []
