"""Ended tasks a node still holds are released (controller/leftovers.py): a server killed
between recording a task's end and releasing it left the task's dir, namespace and log on its
node for good (found by the kill -9 loop of tests/security/test_crash_safety.py)."""

from __future__ import annotations

import pytest

from builders import make_node
from fake_engine import FakeEngine
from gpuyard.controller import Controller
from gpuyard.controller.leftovers import SWEEP_INTERVAL_S
from gpuyard.model import JobState, ManualClock
from gpuyard.spec import parse_job_spec
from gpuyard.store import NewJob, Store


@pytest.fixture
def engine() -> FakeEngine:
    return FakeEngine(make_node("n1", gpus=4))


def submit(store: Store) -> str:
    spec = parse_job_spec({"name": "t", "taskRoles": {"w": {"gpuNumber": 1, "command": "true"}}})
    return store.jobs.submit(NewJob(spec.name, spec.tenant, 0, 0, spec.to_document())).id


def started(ctl: Controller, store: Store, engine: FakeEngine) -> tuple[str, str]:
    jid = submit(store)
    ctl.run_cycle()
    (key,) = engine.keys_on(jid)
    engine.run(key)
    ctl.run_cycle()
    return jid, key


def test_a_task_ended_but_not_released_before_a_crash_is_released_after_it(
    store, engine, clock: ManualClock, monkeypatch
):
    ctl = Controller(store, engine, clock, stop_grace_s=5)
    jid, key = started(ctl, store, engine)
    live_jid, live_key = started(ctl, store, engine)
    with monkeypatch.context() as m:  # the server dies as it would release the ended task
        m.setattr(engine, "release", lambda node, k: (_ for _ in ()).throw(OSError("killed")))
        engine.exit(key, 0, "Completed")
        ctl.run_cycle()
        ctl.run_cycle()
    assert store.jobs.get(jid).state == JobState.SUCCEEDED
    assert engine.held_tasks("n1") == sorted([key, live_key]) and engine.released == []
    restarted = Controller(store, engine, clock, stop_grace_s=5)
    restarted.run_cycle()
    assert engine.released == [key]  # the live task stays
    assert (
        engine.held_tasks("n1") == [live_key] and store.jobs.get(live_jid).state == JobState.RUNNING
    )


def test_the_sweep_runs_on_the_first_cycle_and_then_once_a_minute(store, engine, clock):
    ctl = Controller(store, engine, clock, stop_grace_s=5)
    held = []
    engine.held_tasks = lambda node: held.append(node) or []  # type: ignore[method-assign]
    ctl.run_cycle()
    ctl.run_cycle()
    assert held == ["n1"]
    clock.advance(SWEEP_INTERVAL_S)
    ctl.run_cycle()
    assert held == ["n1", "n1"]
