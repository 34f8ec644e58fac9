"""A starting task's detail ("pulling image X", from its node's status) on the real controller
and store: kept on the task, one job event per change (never one per cycle), gone once the task
runs."""

from __future__ import annotations

from pathlib import Path

from builders import make_node
from fake_engine import FakeEngine
from gpuyard.controller import Controller
from gpuyard.model import ManualClock, TaskState
from gpuyard.runtime.types import TaskPhase, TaskStatus
from gpuyard.spec import parse_job_spec
from gpuyard.store import NewJob, open_store


def test_a_start_detail_is_shown_once_per_change_and_cleared_when_the_task_runs(
    tmp_path: Path,
) -> None:
    store = open_store(tmp_path, clock=ManualClock(1_000_000.0))
    engine = FakeEngine(make_node("n1", gpus=1))
    ctl = Controller(store, engine, ManualClock(1_000_000.0))
    spec = parse_job_spec({"name": "img", "image": "reg.example/app:1",
                           "taskRoles": {"main": {"command": "true"}}})
    job_id = store.jobs.submit(NewJob(spec.name, spec.tenant, 0, 0, spec.to_document())).id
    ctl.run_cycle()
    (key,) = engine.keys_on(job_id)
    texts = ["pulling image reg.example/app:1",
             "pulling image reg.example/app:1 (attempt 2/5 after: connection refused)"]
    for text in texts:
        engine.status_of[key] = TaskStatus(key, TaskPhase.STARTING, detail=text)
        for _ in range(3):
            ctl.run_cycle()
        [task] = store.jobs.tasks(job_id)
        assert (task.state, task.reason, task.message) == (TaskState.STARTING, "PullingImage", text)
    events = [e for e in store.jobs.events(job_id) if e.reason == "PullingImage"]
    assert [(e.task, e.from_state, e.to_state, e.message) for e in events] == [
        ("main/0", "STARTING", "STARTING", text) for text in texts
    ]
    engine.run(key)
    ctl.run_cycle()
    [task] = store.jobs.tasks(job_id)
    assert (task.state, task.reason, task.message) == (TaskState.RUNNING, None, None)
