"""An interactive job's session through the API (docs/interactive.md), on the fake cluster
with canned exec streams (tests/fake_exec.py): `attach` waits for the task and says what
it waits for (channel 6), then is an exec; its end stops the job — the command's exit code,
or the client gone (while it runs, or while the job waits); any session marks the job seen;
a job that is not interactive has no session to attach. The spec's `interactive` and the
tenant's `interactiveIdleTimeoutS` are checked with a 422 at their path."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest

from fake_exec import CannedExec
from gpuyard.model import JobState

JOBS = "/api/v1/jobs"


def interactive_spec(gpus: int = 1, extra: str = "") -> str:
    return (f"name: shell\ntenant: red\ninteractive: true\n{extra}"
            f"taskRoles:\n  main:\n    gpuNumber: {gpus}\n    command: bash\n")


@pytest.fixture
def streams(world) -> CannedExec:
    canned = CannedExec()
    world.engine.streams = lambda node: canned
    return canned


def submit(world, text: str) -> str:
    r = world.submit("alice", text)
    assert r.status_code == 201, r.text
    return r.json()["id"]


def start(world, job_id: str) -> None:
    """Schedule the job and have its task run."""
    world.ctl.run_cycle()
    world.engine.run(world.engine.keys_on(job_id)[-1])
    world.ctl.run_cycle()


def until(ws, channel: int) -> list[tuple[int, bytes]]:
    """Frames up to and including the first of `channel`."""
    frames = []
    while True:
        frame = ws.receive_bytes()
        frames.append((frame[0], frame[1:]))
        if frame[0] in (channel, 3):
            return frames


def eventually(check: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.02)


def attach(world, job_id: str, who: str = "alice"):
    ws = world.client.websocket_connect(f"{JOBS}/{job_id}/exec", headers=world.headers(who))
    session = ws.__enter__()
    session.send_text(json.dumps({"command": ["sh", "-c", "exit 3"], "attach": True}))
    return ws, session


def note(world, job_id: str, reason: str) -> str:
    (message,) = [e.message for e in world.store.jobs.events(job_id)
                  if e.reason == reason and e.from_state == e.to_state]
    return message


def test_attach_waits_for_the_task_then_the_commands_exit_ends_the_job(world, streams):
    job_id = submit(world, interactive_spec())
    ws, session = attach(world, job_id)
    try:
        channel, body = until(session, 6)[-1]
        assert channel == 6 and json.loads(body)["state"] == "QUEUED"
        start(world, job_id)
        assert until(session, 5)[-1] == (5, b'{"task": "main/0"}')
        streams.wait_opened()
        streams.finish(3)
        assert until(session, 3)[-1] == (3, b'{"exitCode": 3}')
    finally:
        ws.__exit__(None, None, None)
    assert streams.opened == [(world.engine.keys_on(job_id)[-1], ["sh", "-c", "exit 3"], False)]
    eventually(lambda: world.store.jobs.get(job_id).stop_requested == "SessionEnded(exit 3)")
    assert note(world, job_id, "SessionEnded") == "alice's session ended: its command exited 3"
    assert world.store.jobs.get(job_id).session_seen_at == world.clock.now()
    key = world.engine.keys_on(job_id)[-1]
    world.ctl.run_cycle()  # stops the task
    world.engine.exit(key, 0, "Completed")
    world.ctl.run_cycle()
    job = world.store.jobs.get(job_id)
    assert (job.state, job.reason) == (JobState.FAILED, "SessionEnded(exit 3)")


def test_the_wait_says_why_and_a_client_gone_while_waiting_stops_the_job(world, streams):
    job_id = submit(world, interactive_spec(gpus=4))  # 2 of the node's 4 GPUs are taken
    ws, session = attach(world, job_id)
    try:
        until(session, 6)
        world.ctl.run_cycle()
        while True:
            progress = json.loads(until(session, 6)[-1][1])
            if progress["reason"]:
                break
        assert progress["state"] == "QUEUED" and progress["code"]
    finally:
        ws.__exit__(None, None, None)  # the client goes away
    eventually(lambda: world.store.jobs.get(job_id).stop_requested == "SessionLost")
    world.ctl.run_cycle()
    job = world.store.jobs.get(job_id)
    assert (job.state, job.reason) == (JobState.STOPPED, "SessionLost")
    assert note(world, job_id, "SessionLost") == (
        "alice's session ended before its command did: the client went away while the job "
        "waited to start"
    )
    assert streams.opened == []


def test_a_client_gone_while_the_command_runs_stops_the_job_and_kills_it(world, streams):
    job_id = submit(world, interactive_spec())
    start(world, job_id)
    ws, session = attach(world, job_id)
    try:
        until(session, 5)
        streams.wait_opened()
    finally:
        ws.__exit__(None, None, None)
    streams.wait_closed("s0")  # the command is killed
    eventually(lambda: world.store.jobs.get(job_id).stop_requested == "SessionLost")


def test_a_plain_exec_marks_the_job_seen_and_ends_nothing(world, streams):
    job_id = submit(world, interactive_spec())
    start(world, job_id)
    world.clock.advance(42)
    path = f"{JOBS}/{job_id}/exec"
    with world.client.websocket_connect(path, headers=world.headers("alice")) as ws:
        ws.send_text(json.dumps({"command": ["true"]}))
        until(ws, 5)
        streams.wait_opened()
        streams.finish(0)
        assert until(ws, 3)[-1] == (3, b'{"exitCode": 0}')
    eventually(lambda: world.store.jobs.get(job_id).session_seen_at == world.clock.now())
    assert world.store.jobs.get(job_id).stop_requested is None


@pytest.mark.parametrize("which", ["batch", "ended"])
def test_only_an_interactive_job_not_ended_has_a_session_to_attach(world, streams, which):
    job_id = world.jobs["red"]
    if which == "ended":
        job_id = submit(world, interactive_spec())
        world.call("alice", "POST", f"{JOBS}/{job_id}/cancel")
        world.ctl.run_cycle()
        assert world.store.jobs.get(job_id).state == JobState.STOPPED
    ws, session = attach(world, job_id)
    try:
        end = json.loads(until(session, 3)[-1][1])
    finally:
        ws.__exit__(None, None, None)
    assert end["status"] == 409
    expected = "is not interactive" if which == "batch" else "already ended STOPPED"
    assert expected in end["error"]
    assert world.store.jobs.get(job_id).reason != "SessionLost"
    assert world.store.jobs.get(world.jobs["red"]).stop_requested is None


def test_a_task_the_job_lacks_is_a_404_and_ends_the_session_and_the_job(world, streams):
    job_id = submit(world, interactive_spec())
    start(world, job_id)
    path = f"{JOBS}/{job_id}/exec"
    with world.client.websocket_connect(path, headers=world.headers("alice")) as ws:
        ws.send_text(json.dumps({"command": ["sh"], "attach": True, "task": "main/5"}))
        end = json.loads(until(ws, 3)[-1][1])
    assert (end["status"], end["error"]) == (404, f"job {job_id} has no task main/5")
    eventually(lambda: world.store.jobs.get(job_id).stop_requested == "SessionLost")
    assert note(world, job_id, "SessionLost") == (
        f"alice's session ended before its command did: the session could not open: job "
        f"{job_id} has no task main/5"
    )


def test_a_bad_attach_is_a_422_at_its_field(world, streams):
    job_id = submit(world, interactive_spec())
    path = f"{JOBS}/{job_id}/exec"
    with world.client.websocket_connect(path, headers=world.headers("alice")) as ws:
        ws.send_text(json.dumps({"command": ["sh"], "attach": "yes"}))
        end = json.loads(until(ws, 3)[-1][1])
    assert end["status"] == 422 and [e["path"] for e in end["errors"]] == ["body.attach"]
    assert world.store.jobs.get(job_id).stop_requested is None  # nothing was attached


@pytest.mark.parametrize(
    ("extra", "path"),
    [("interactive: 'yes'\n", "interactive"), ("interactive: true\nretryCount: 2\n", "retryCount")],
)
def test_a_bad_interactive_spec_is_a_422_at_its_path(world, extra, path):
    r = world.submit("alice", f"name: s\ntenant: red\n{extra}taskRoles:\n  m:\n    command: sh\n")
    assert r.status_code == 422, r.text
    assert [e["path"] for e in r.json()["errors"]] == [path]


@pytest.mark.parametrize(("value", "status"), [(10, 422), (True, 422), ("900", 422), (120, 200)])
def test_the_tenants_idle_timeout_is_checked(world, value, status):
    r = world.call("root", "PATCH", "/api/v1/tenants/red", json={"interactiveIdleTimeoutS": value})
    assert r.status_code == status, r.text
    if status == 422:
        assert r.json()["errors"][0]["path"] == "interactiveIdleTimeoutS"
    else:
        assert world.store.tenants.get("red").tenant.interactive_idle_timeout_s == 120
        got = world.call("root", "GET", "/api/v1/tenants/red").json()
        assert got["interactiveIdleTimeoutS"] == 120
