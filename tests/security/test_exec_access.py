"""Exec and port-forward are running code as the job's tenant: only the job's owner, the
tenant's admins and platform admins may (the rule of logs and secrets); a viewer or another
member of the tenant is refused (403), a member of another tenant does not see the job (404),
and none of them leaves an `Exec` event. The sockets take the bearer header only: the
portal's cookie, which a page of another site could make a browser send with a WebSocket
handshake, opens nothing (401). Who may, reaches the engine (tests/e2e/test_exec_e2e.py)."""

from __future__ import annotations

import json

import pytest

JOBS = "/api/v1/jobs"
SPEC = "name: shell\ntenant: red\ntaskRoles:\n  main:\n    command: sleep 100\n"


@pytest.fixture(scope="module")
def running(shared_world) -> str:
    r = shared_world.submit("alice", SPEC)
    assert r.status_code == 201, r.text
    job_id = r.json()["id"]
    shared_world.ctl.run_cycle()
    shared_world.engine.run(shared_world.engine.keys_on(job_id)[-1])
    shared_world.ctl.run_cycle()
    assert shared_world.call("root", "GET", f"{JOBS}/{job_id}").json()["state"] == "RUNNING"
    return job_id


def session_end(world, headers: dict[str, str], path: str, request: dict) -> dict:
    """Open the socket, send the request; the server's channel-3 answer as JSON."""
    with world.client.websocket_connect(path, headers=headers) as ws:
        ws.send_text(json.dumps(request))
        frame = ws.receive_bytes()
    assert frame[0] == 3, frame
    return json.loads(frame[1:])


def bearer(world, who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {world.tokens[who]}"}


@pytest.mark.parametrize(("who", "status"), [("vic", 403), ("amy", 403), ("bob", 404)])
@pytest.mark.parametrize(
    ("door", "request_"),
    [("exec", {"command": ["sh"], "tty": True}), ("portforward", {"port": 8888})],
)
def test_who_may_not_exec_is_refused_and_leaves_no_event(
    shared_world, running, who, status, door, request_
):
    end = session_end(shared_world, bearer(shared_world, who), f"{JOBS}/{running}/{door}", request_)
    assert end["status"] == status, end
    if who == "bob":
        assert end["error"] == f"no job {running}"  # as if it did not exist
    events = shared_world.call("root", "GET", f"{JOBS}/{running}/events").json()["events"]
    assert not [e for e in events if e["reason"] in ("Exec", "PortForward")]


def test_the_portal_cookie_opens_no_session(shared_world, running):
    cookie = {"Cookie": f"gpuyard_session={shared_world.tokens['alice']}"}
    end = session_end(shared_world, cookie, f"{JOBS}/{running}/exec", {"command": ["sh"]})
    assert end["status"] == 401


def test_a_bad_request_is_a_422_with_its_field(shared_world, running):
    end = session_end(
        shared_world,
        bearer(shared_world, "alice"),
        f"{JOBS}/{running}/exec",
        {"command": [], "task": "../etc", "rows": True},
    )
    assert end["status"] == 422
    paths = {e["path"] for e in end["errors"]}
    assert {"body.command", "body.task", "body.rows"} <= paths
