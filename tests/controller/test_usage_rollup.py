"""The usage roll-up (store/rollup.py) against the task rows it is rolled up from: whatever the
order of starts, ends (reported late, with an end before the last roll-up) and roll-ups, its
GPU-seconds equal the store's own count of each job's GPU-seconds, shared GPUs by their share;
CPU-seconds and the GPU-seconds of preempted attempts likewise."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import make_node
from gpuyard.model import ManualClock, TaskReason, TaskState
from gpuyard.spec import parse_job_spec
from gpuyard.store import NewJob, NewTask, Store, open_store, rollup
from gpuyard.store.rollup import hour_slices

T0 = 1_000_000.0 - 1234.5  # not on an hour


@dataclass(frozen=True)
class Run:
    node: str
    gpus: tuple[int, ...]
    gpu_memory_mb: int
    cpu_milli: int
    start: float
    duration: float | None  # None: still running at the end
    lag: float  # how late its end is recorded
    preempted: bool


runs = st.builds(
    Run,
    node=st.sampled_from(["n1", "gone"]),
    gpus=st.sampled_from([(), (0,), (1, 2), (3,)]),
    gpu_memory_mb=st.sampled_from([0, 0, 20480, 40960]),
    cpu_milli=st.integers(100, 8000),
    start=st.floats(0, 6 * 3600),
    duration=st.one_of(st.none(), st.floats(0, 4 * 3600)),
    lag=st.floats(0, 300),
    preempted=st.booleans(),
)


def _store(path: Path) -> Store:
    store = open_store(path, clock=ManualClock(T0))
    store.nodes.record([make_node("n1", gpus=4)], "local")
    return store


def _bind(store: Store, run: Run) -> int:
    spec = parse_job_spec({"name": "r", "taskRoles": {"w": {"command": "x", "gpuNumber": 1}}})
    job = store.jobs.submit(NewJob("r", "default", 0, 0, spec.to_document()))
    memory = run.gpu_memory_mb if len(run.gpus) == 1 else 0
    new = NewTask("w", 0, run.node, run.gpus, run.cpu_milli, 256, memory)
    [task] = store.jobs.bind(job.id, 1, [new])
    return task.id


def _advance(store: Store, runs_: list[Run], ids: list[int], now: float, seen: set) -> None:
    """Record what the controller would have observed by `now`: starts, then late ends."""
    for run, tid in zip(runs_, ids, strict=True):
        start = T0 + run.start
        if start <= now and (tid, "start") not in seen:
            store.jobs.task_running(tid, start)
            seen.add((tid, "start"))
        if run.duration is None or (tid, "end") in seen or (tid, "start") not in seen:
            continue
        end = start + run.duration
        if end + run.lag <= now:
            reason = TaskReason.PREEMPTED if run.preempted else "Completed"
            store.jobs.task_ended(tid, TaskState.STOPPED, None, reason, None, end)
            seen.add((tid, "end"))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    runs_=st.lists(runs, min_size=1, max_size=6),
    rolls=st.lists(st.floats(0, 12 * 3600), max_size=6),
)
def test_rolled_up_usage_equals_the_tasks_gpu_seconds(runs_: list[Run], rolls: list[float]):
    with tempfile.TemporaryDirectory(dir="/tmp") as d:
        store = _store(Path(d))
        ids = [_bind(store, r) for r in runs_]
        seen: set = set()
        end = T0 + 12 * 3600 + 400  # every recorded end is in by then
        for t in [*sorted(T0 + r for r in rolls), end]:
            _advance(store, runs_, ids, t, seen)
            store.accounting.roll_up(t)
        _check(store, runs_, end)
        store.close()


def _check(store: Store, runs_: list[Run], now: float) -> None:
    hours = store.accounting.hours(0.0, now + 3600)
    jobs = {h.job_id for h in hours}
    expected = store.usage.attained_by_job(jobs, now)
    for job in jobs:
        rolled = sum(h.gpu_seconds for h in hours if h.job_id == job)
        assert rolled == pytest.approx(expected[job], rel=1e-9, abs=1e-6)
    total = sum(store.usage.attained_by_job(_all_jobs(store), now).values())
    assert sum(h.gpu_seconds for h in hours) == pytest.approx(total, rel=1e-9, abs=1e-6)
    cpu = sum(r.cpu_milli / 1000 * _ran(r, now) for r in runs_)
    assert sum(h.cpu_seconds for h in hours) == pytest.approx(cpu, rel=1e-9, abs=1e-6)
    lost = sum(_ran(r, now) * _share(r) for r in runs_ if r.preempted and r.duration is not None)
    assert sum(h.lost_gpu_seconds for h in hours) == pytest.approx(lost, rel=1e-9, abs=1e-6)
    assert all(h.hour % 3600 == 0 for h in hours)


def _all_jobs(store: Store) -> list[str]:
    return [j.id for j in store.jobs.list(limit=1000)]


def _ran(r: Run, now: float) -> float:
    return r.duration if r.duration is not None else now - (T0 + r.start)


def _share(r: Run) -> float:
    if r.gpu_memory_mb and len(r.gpus) == 1:
        return 1.0 if r.node == "gone" else r.gpu_memory_mb / 81920
    return float(len(r.gpus))


def test_hour_slices_cut_at_each_hour():
    assert list(hour_slices(3000.0, 7300.0)) == [(0.0, 600.0), (3600.0, 3600.0), (7200.0, 100.0)]
    assert list(hour_slices(5.0, 5.0)) == []


def test_a_task_rolled_while_running_then_ended_earlier_is_corrected(tmp_path: Path):
    store = _store(tmp_path)
    tid = _bind(store, Run("n1", (0,), 0, 1000, 0, None, 0, False))
    store.jobs.task_running(tid, T0)
    store.accounting.roll_up(T0 + 100)
    store.jobs.task_ended(tid, TaskState.SUCCEEDED, 0, "Completed", None, T0 + 60)
    store.accounting.roll_up(T0 + 200)
    [hour] = store.accounting.hours(0.0, T0 + 7200)
    assert hour.gpu_seconds == pytest.approx(60.0)
    store.accounting.roll_up(T0 + 300)  # done: nothing more
    assert store.accounting.hours(0.0, T0 + 7200)[0].gpu_seconds == pytest.approx(60.0)


def test_a_long_history_is_rolled_up_over_several_passes(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(rollup, "BATCH", 2)
    store = _store(tmp_path)
    for i in range(5):
        tid = _bind(store, Run("n1", (0,), 0, 1000, 0, None, 0, False))
        store.jobs.task_running(tid, T0 + i)
        store.jobs.task_ended(tid, TaskState.SUCCEEDED, 0, "Completed", None, T0 + i + 100)
    store.accounting.roll_up(T0 + 1000)
    assert sum(h.gpu_seconds for h in store.accounting.hours(0.0, T0 + 7200)) == 200.0
    store.accounting.roll_up(T0 + 1001)
    store.accounting.roll_up(T0 + 1002)
    assert sum(h.gpu_seconds for h in store.accounting.hours(0.0, T0 + 7200)) == 500.0


def test_the_queue_is_counted_for_the_time_since_the_last_pass():
    p = rollup.plan([], [], 7300.0, {"red": 2, "blue": 0}, 60.0)
    assert p.queued_s == {(7200.0, "red"): 120.0}
    assert rollup.plan([], [], 7300.0, {"red": 2}, 0.0).queued_s == {}
