"""Jobs without gang allocation (`gang: false`, OpenPAI's `gangAllocation: false`) on the real
controller, store and scheduler with the fake cluster: the tasks that fit start now, the
others join the same job and attempt as room frees; an end decided while tasks wait cancels
them; a restarted controller goes on from the store."""

from __future__ import annotations

from pathlib import Path

from builders import make_node
from fake_engine import FakeEngine
from gpuyard.controller import Controller
from gpuyard.model import JobState, ManualClock, TaskReason
from gpuyard.spec import parse_job_spec
from gpuyard.store import NewJob, Store, open_store

SIX = {"worker": {"taskNumber": 6, "gpuNumber": 1, "command": "x"}}


def setup(tmp_path: Path) -> tuple[Store, FakeEngine, Controller, ManualClock, str]:
    clock = ManualClock(1_000_000.0)
    store = open_store(tmp_path, clock=clock)
    engine = FakeEngine(make_node("n1", gpus=4), now=clock.now())
    ctl = Controller(store, engine, clock, stop_grace_s=5)
    spec = parse_job_spec({"name": "many", "gang": False, "taskRoles": SIX})
    jid = store.jobs.submit(
        NewJob(spec.name, spec.tenant, spec.priority, spec.retry_count, spec.to_document())
    ).id
    return store, engine, ctl, clock, jid


def indices(engine: FakeEngine, jid: str) -> list[int]:
    return sorted(engine.launched[k].index for k in engine.keys_on(jid))


def end(engine: FakeEngine, clock: ManualClock, key: str, code: int = 0) -> None:
    clock.advance(1)
    engine.now = clock.now()
    engine.exit(key, code, TaskReason.COMPLETED if code == 0 else TaskReason.error(code))


def test_six_tasks_on_four_gpus_start_four_then_two(tmp_path: Path) -> None:
    store, engine, ctl, clock, jid = setup(tmp_path)
    ctl.run_cycle()
    assert indices(engine, jid) == [0, 1, 2, 3]
    job = store.jobs.get(jid)
    assert job is not None and job.state == JobState.SCHEDULED and job.attempt == 1
    for key in engine.keys_on(jid):
        engine.run(key)
    ctl.run_cycle()
    assert store.jobs.get(jid).state == JobState.RUNNING  # type: ignore[union-attr]
    first = engine.keys_on(jid)
    end(engine, clock, first[0])
    end(engine, clock, first[1])
    # a new controller on the same store (a restart) goes on from what the store says
    ctl = Controller(store, engine, clock, stop_grace_s=5)
    ctl.run_cycle()
    assert indices(engine, jid) == [0, 1, 2, 3, 4, 5]
    job = store.jobs.get(jid)
    assert job is not None and (job.state, job.attempt) == (JobState.RUNNING, 1)
    assert [e.reason for e in store.jobs.events(jid)].count("TasksScheduled") == 1
    for key in engine.keys_on(jid)[2:]:
        engine.run(key)
    ctl.run_cycle()
    for key in engine.keys_on(jid)[2:]:
        end(engine, clock, key)
    ctl.run_cycle()
    job = store.jobs.get(jid)
    assert job is not None and (job.state, job.attempt) == (JobState.SUCCEEDED, 1), job.message


def test_the_placed_tasks_ending_does_not_end_the_job(tmp_path: Path) -> None:
    """Every placed task succeeded while two still wait: the job is not done, they start."""
    store, engine, ctl, clock, jid = setup(tmp_path)
    ctl.run_cycle()
    for key in engine.keys_on(jid):
        engine.run(key)
    ctl.run_cycle()
    for key in engine.keys_on(jid):
        end(engine, clock, key)
    ctl.run_cycle()
    job = store.jobs.get(jid)
    assert job is not None and job.state == JobState.RUNNING, job.message
    assert indices(engine, jid) == [0, 1, 2, 3, 4, 5]


def test_a_decided_end_cancels_the_tasks_not_placed(tmp_path: Path) -> None:
    store, engine, ctl, clock, jid = setup(tmp_path)
    ctl.run_cycle()
    keys = engine.keys_on(jid)
    for key in keys:
        engine.run(key)
    ctl.run_cycle()
    end(engine, clock, keys[0], code=1)  # the first failure decides (minFailedTasks 1)
    ctl.run_cycle()
    assert set(keys[1:]) <= set(engine.stopped)
    assert indices(engine, jid) == [0, 1, 2, 3]  # the freed GPU went to nobody of this job
    for key in keys[1:]:
        engine.exit(key, 143, "Signal(SIGTERM)")
    ctl.run_cycle()
    ctl.run_cycle()
    job = store.jobs.get(jid)
    assert job is not None and job.state == JobState.FAILED
    assert "2 task(s) not placed yet were cancelled" in (job.message or "")
    assert indices(engine, jid) == [0, 1, 2, 3]


def test_a_cancel_stops_it_whole(tmp_path: Path) -> None:
    store, engine, ctl, clock, jid = setup(tmp_path)
    ctl.run_cycle()
    keys = engine.keys_on(jid)
    for key in keys:
        engine.run(key)
    ctl.run_cycle()
    store.jobs.request_stop(jid, TaskReason.CANCELLED)
    ctl.run_cycle()
    assert set(keys) <= set(engine.stopped)
    for key in keys:
        engine.exit(key, 143, "Signal(SIGTERM)")
    ctl.run_cycle()
    job = store.jobs.get(jid)
    assert job is not None and job.state == JobState.STOPPED
    assert indices(engine, jid) == [0, 1, 2, 3]
