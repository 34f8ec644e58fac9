"""Completion policy (OpenPAI's minFailedTasks / minSucceededTasks per role), table-driven on
the real controller and store with the fake engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from builders import make_node
from fake_engine import FakeEngine
from gpuyard.controller import Controller
from gpuyard.model import JobState, ManualClock, TaskReason
from gpuyard.spec import parse_job_spec
from gpuyard.store import NewJob, open_store

W3 = {"worker": {"taskNumber": 3, "command": "x"}}


def workers(**policy: int) -> dict:
    return {"worker": {"taskNumber": 3, "command": "x", **policy}}


CHIEF = {
    "chief": {"command": "x", "minSucceededTasks": 1},
    "worker": {"taskNumber": 2, "command": "x", "minFailedTasks": -1},
}

# roles, task ends in the order they happen (role, index, exit code | "lost" | "notfound"),
# then: the job's state, its attempt, the tasks the policy stopped
TABLE = [
    ("any failure fails", W3, [("worker", 0, 1)], JobState.FAILED, 1, {"worker-1", "worker-2"}),
    ("all succeed", W3, [("worker", i, 0) for i in range(3)], JobState.SUCCEEDED, 1, set()),
    ("one success waits", W3, [("worker", 0, 0)], JobState.RUNNING, 1, set()),
    (
        "a failure under minFailed is tolerated",
        workers(minFailedTasks=2),
        [("worker", 0, 1), ("worker", 1, 0), ("worker", 2, 0)],
        JobState.SUCCEEDED,
        1,
        set(),
    ),
    (
        "minFailed reached fails",
        workers(minFailedTasks=2),
        [("worker", 0, 1), ("worker", 1, 2)],
        JobState.FAILED,
        1,
        {"worker-2"},
    ),
    (
        "-1 never fails by count",
        workers(minFailedTasks=-1),
        [("worker", i, 1) for i in range(3)],
        JobState.SUCCEEDED,
        1,
        set(),
    ),
    (
        "minSucceeded reached succeeds and stops the rest",
        CHIEF,
        [("worker", 0, 3), ("chief", 0, 0)],
        JobState.SUCCEEDED,
        1,
        {"worker-1"},
    ),
    (
        "a success after the failure that decided does not count",
        workers(minSucceededTasks=1),
        [("worker", 0, 1), ("worker", 1, 0)],
        JobState.FAILED,
        1,
        {"worker-1", "worker-2"},
    ),
    (
        "a lost node requeues whatever the policy",
        workers(minFailedTasks=-1),
        [("worker", 1, "lost")],
        JobState.QUEUED,  # requeued, backing off before it is placed again (a platform failure)
        2,
        {"worker-0", "worker-2"},
    ),
    (
        "an invalid failure fails whatever the policy",
        workers(minFailedTasks=-1),
        [("worker", 2, "notfound")],
        JobState.FAILED,
        1,
        {"worker-0", "worker-1"},
    ),
]


@pytest.mark.parametrize(
    ("roles", "ends", "final", "attempt", "stopped"),
    [row[1:] for row in TABLE],
    ids=[row[0] for row in TABLE],
)
def test_completion_policy(tmp_path: Path, roles, ends, final, attempt, stopped) -> None:
    clock = ManualClock(1_000_000.0)
    store = open_store(tmp_path, clock=clock)
    engine = FakeEngine(make_node("n1", gpus=0, cpu=64), now=clock.now())
    ctl = Controller(store, engine, clock, stop_grace_s=5)
    spec = parse_job_spec({"name": "policy", "taskRoles": roles})
    jid = store.jobs.submit(
        NewJob(spec.name, spec.tenant, spec.priority, spec.retry_count, spec.to_document())
    ).id
    ctl.run_cycle()
    keys = {f"{engine.launched[k].role}-{engine.launched[k].index}": k for k in engine.keys_on(jid)}
    for key in keys.values():
        engine.run(key)
    ctl.run_cycle()
    for role, index, code in ends:
        clock.advance(1)
        engine.now = clock.now()
        key = keys[f"{role}-{index}"]
        if code == "lost":
            engine.status_of.pop(key)
        elif code == "notfound":
            engine.exit(key, 127, TaskReason.COMMAND_NOT_FOUND)
        else:
            engine.exit(key, code, TaskReason.COMPLETED if code == 0 else TaskReason.error(code))
        ctl.run_cycle()
    assert {name for name, key in keys.items() if key in engine.stopped} == stopped
    for key in keys.values():
        if key in engine.stopped:
            engine.exit(key, 143, "Signal(SIGTERM)")
    ctl.run_cycle()
    ctl.run_cycle()
    job = store.jobs.get(jid)
    assert job is not None
    assert (job.state, job.attempt) == (final, attempt), job.message
    assert job.retries_used == 0
