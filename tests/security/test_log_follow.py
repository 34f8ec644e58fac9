"""Following logs cannot stall the API, and one user cannot open follows without end.

Before: `logs?follow=true` read the log file and polled the database on the event loop (500
followers: `/healthz` p50 2.8 s), so one slow read stalled every request, and a user could
open as many follows as they liked. Now every read runs in a worker thread of the log
streams' own, and a user may follow `--log-follows-per-user` logs at once (default 8; 429
beyond, the slot given back when a follower leaves).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time

import httpx
import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.container]

CAP = 8
TICKER = """\
name: ticker
taskRoles:
  main:
    cpuNumber: 0.2
    memoryMB: 128
    command: "while true; do echo tick; sleep 0.2; done"
"""


def follow(server, job: str, token: str, stack: contextlib.ExitStack) -> httpx.Response:
    """Open a follow of the job's log and keep it open (until `stack` closes)."""
    client = stack.enter_context(
        httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"})
    )
    return stack.enter_context(
        client.stream("GET", f"/api/v1/jobs/{job}/logs", params={"follow": "true"}, timeout=30)
    )


def tenant_admin_token(server, name: str) -> str:
    r = server.http.post(
        "/api/v1/users",
        json={"name": name, "memberships": [{"tenant": "default", "role": "tenant-admin"}]},
    )
    assert r.status_code == 201, r.text
    return server.http.post(f"/api/v1/users/{name}/tokens", json={}).json()["token"]


def again_allowed(server, job: str, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with server.http.stream("GET", f"/api/v1/jobs/{job}/logs", params={"follow": "true"}) as r:
            if r.status_code == 200:
                return True
        time.sleep(0.2)
    return False


def test_follows_beyond_the_cap_are_429_and_the_api_answers(server):
    job = server.submit(TICKER)
    server.wait(job, {"RUNNING"})
    bob = tenant_admin_token(server, "bob")
    with contextlib.ExitStack() as everyone, contextlib.ExitStack() as first:
        opened = [follow(server, job, server.token, first)]
        opened += [follow(server, job, server.token, everyone) for _ in range(CAP - 1)]
        opened += [follow(server, job, bob, everyone) for _ in range(CAP)]
        assert [r.status_code for r in opened] == [200] * (2 * CAP)
        assert server.http.get("/healthz").json() == {"status": "ok"}
        assert server.http.get(f"/api/v1/jobs/{job}").status_code == 200
        with server.http.stream(
            "GET", f"/api/v1/jobs/{job}/logs", params={"follow": "true"}
        ) as one_more:
            assert one_more.status_code == 429  # (a 200 would stream on: not read)
            assert f"follows {CAP} logs already" in one_more.read().decode()
        assert server.http.get(f"/api/v1/jobs/{job}/logs").status_code == 200  # no follow
        first.close()  # one of admin's followers leaves: its slot comes back
        assert again_allowed(server, job)


def test_a_stuck_log_read_does_not_stall_the_api(server):
    """A log read that never returns (here: the log replaced by a FIFO nobody writes, as a
    hung network disk would) holds up its own stream only."""
    job = server.submit(TICKER)
    server.wait(job, {"RUNNING"})
    log = server.data_dir / "node" / "tasks" / f"{job}-a1-main-0" / "log"
    os.rename(log, log.with_name("log.real"))
    os.mkfifo(log)

    def follow_the_stuck_log() -> None:
        with contextlib.suppress(httpx.HTTPError):  # it ends broken when the FIFO is undone
            server.as_user(server.token).get(
                f"/api/v1/jobs/{job}/logs", params={"follow": "true"}, timeout=60
            )

    stuck = threading.Thread(target=follow_the_stuck_log, daemon=True)
    try:
        stuck.start()
        time.sleep(1)  # let the follow reach its read
        assert server.http.get("/healthz").json() == {"status": "ok"}
        assert server.http.get(f"/api/v1/jobs/{job}").json()["state"] == "RUNNING"
    finally:
        with open(log, "wb"):  # a writer at last: the stuck read sees the end
            pass
        os.unlink(log)
        os.rename(log.with_name("log.real"), log)
        stuck.join(30)
