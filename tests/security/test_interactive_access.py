"""Attaching to an interactive job (`gpuyard run`'s session, docs/interactive.md) is exec:
only the job's owner, its tenant's admins and platform admins may. Refused callers matter
twice here, since the session's end stops the job: a viewer or another member of the tenant
is refused (403), a member of another tenant does not see the job (404), and neither waits
on the job, opens anything, leaves an event or — leaving at once — stops it."""

from __future__ import annotations

import json
import time

import pytest

JOBS = "/api/v1/jobs"
SPEC = "name: shell\ntenant: red\ninteractive: true\ntaskRoles:\n  main:\n    command: bash\n"


@pytest.fixture(scope="module")
def waiting(shared_world) -> str:
    """alice's interactive job, queued (held: it stays so), nobody attached."""
    r = shared_world.submit("alice", SPEC)
    assert r.status_code == 201, r.text
    job_id = r.json()["id"]
    assert shared_world.call("alice", "POST", f"{JOBS}/{job_id}/hold").status_code == 200
    return job_id


def first_frame(world, who: str, job_id: str) -> bytes:
    """Attach as `who`, and leave after the server's first frame."""
    headers = {"Authorization": f"Bearer {world.tokens[who]}"}
    with world.client.websocket_connect(f"{JOBS}/{job_id}/exec", headers=headers) as ws:
        ws.send_text(json.dumps({"command": ["sh"], "attach": True}))
        return ws.receive_bytes()


@pytest.mark.parametrize(("who", "status"), [("vic", 403), ("amy", 403), ("bob", 404)])
def test_who_may_not_exec_may_not_attach_nor_end_the_job(shared_world, waiting, who, status):
    frame = first_frame(shared_world, who, waiting)
    assert frame[0] == 3, frame  # the refusal, not the progress of a wait
    end = json.loads(frame[1:])
    assert end["status"] == status, end
    if who == "bob":
        assert end["error"] == f"no job {waiting}"  # as if it did not exist
    shared_world.ctl.run_cycle()
    job = shared_world.store.jobs.get(waiting)
    assert job.stop_requested is None and job.state == "QUEUED"
    events = shared_world.call("root", "GET", f"{JOBS}/{waiting}/events").json()["events"]
    assert not [e for e in events if e["reason"] in ("Exec", "SessionEnded", "SessionLost")]


def test_the_owner_may_and_leaving_ends_the_job(shared_world, waiting):
    assert first_frame(shared_world, "alice", waiting)[0] == 6  # waits: the job is held
    shared_world.ctl.run_cycle()
    for _ in range(200):  # the server ends the job once it has seen the client leave
        if shared_world.store.jobs.get(waiting).state == "STOPPED":
            break
        time.sleep(0.05)
        shared_world.ctl.run_cycle()
    job = shared_world.store.jobs.get(waiting)
    assert (job.state, job.reason) == ("STOPPED", "SessionLost")
