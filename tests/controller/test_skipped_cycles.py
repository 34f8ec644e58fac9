"""The controller reads only the jobs that changed (controller/mirror.py) and skips the
scheduling cycles whose inputs did not change and whose outcome the scheduler says would be
the same (controller/quiet.py); a skipped cycle never delays a decision: a submission, a
hold, a node, a tenant's quota, a task's end or a backoff's end each bring one back."""

from __future__ import annotations

import pytest
from sqlalchemy import event

from builders import make_node, make_tenant
from fake_engine import FakeEngine
from gpuyard.controller import Controller
from gpuyard.controller.loop import FULL_POLL_S
from gpuyard.controller.quiet import MAX_QUIET_S
from gpuyard.model import JobState, ManualClock
from gpuyard.spec import parse_job_spec
from gpuyard.store import NewJob, Pending, Store


@pytest.fixture
def engine() -> FakeEngine:
    return FakeEngine(make_node("n1", gpus=4))


def submit(store: Store, gpus: int, name: str = "j") -> str:
    spec = parse_job_spec({"name": name, "taskRoles": {"w": {"gpuNumber": gpus, "command": "x"}}})
    return store.jobs.submit(NewJob(spec.name, spec.tenant, 0, 0, spec.to_document())).id


def cycles(ctl: Controller, n: int = 1) -> int:
    """Run n cycles; how many scheduling cycles were skipped."""
    before = ctl.quiet.skipped
    for _ in range(n):
        ctl.run_cycle()
    return ctl.quiet.skipped - before


def test_a_queue_that_cannot_change_is_not_scheduled_again(store, engine, clock):
    ctl = Controller(store, engine, clock)
    big = submit(store, 8)  # never fits a 4-GPU node
    assert cycles(ctl) == 0 and store.jobs.get(big).state == JobState.QUEUED
    assert cycles(ctl, 5) == 5
    clock.advance(MAX_QUIET_S)  # still a full cycle now and then (estimates follow time)
    assert cycles(ctl) == 0 and cycles(ctl) == 1


@pytest.mark.parametrize("change", ["submit", "hold", "node", "tenant", "priority"])
def test_every_input_of_a_cycle_brings_it_back(store, engine, clock, change):
    ctl = Controller(store, engine, clock)
    big = submit(store, 8)
    cycles(ctl, 2)
    if change == "submit":
        fits = submit(store, 1, "small")
    elif change == "hold":
        store.jobs.hold(big, "admin", Pending("Held", "held by admin"))
    elif change == "node":
        engine._nodes["n2"] = make_node("n2", gpus=8)
    elif change == "tenant":
        store.tenants.create(make_tenant("other", gpus=1))
    else:
        store.jobs.set_priority(big, 3, "admin")
    assert cycles(ctl) == 0
    if change == "submit":
        assert store.jobs.get(fits).state == JobState.SCHEDULED
    if change == "node":
        assert store.jobs.get(big).state == JobState.SCHEDULED


def test_a_task_that_ends_frees_its_gpus_for_the_queue_at_once(store, engine, clock):
    ctl = Controller(store, engine, clock)
    first = submit(store, 4)
    ctl.run_cycle()
    (key,) = engine.keys_on(first)
    engine.run(key)
    second = submit(store, 4)
    assert cycles(ctl, 3) >= 1 and store.jobs.get(second).state == JobState.QUEUED
    engine.exit(key, 0, "Completed")
    ctl.run_cycle()  # the end is observed, then the second job placed, in the same cycle
    assert store.jobs.get(second).state == JobState.SCHEDULED


def test_a_backed_off_job_is_placed_when_its_backoff_ends(store, engine, clock: ManualClock):
    ctl = Controller(store, engine, clock)
    submit(store, 8)  # keeps the queue non-empty
    job = submit(store, 1)
    store.jobs.move(job, JobState.SCHEDULED, "Scheduled")  # a platform failure's requeue:
    store.jobs.move(job, JobState.QUEUED, "AgentError", attempt=2, not_before=clock.now() + 20)
    cycles(ctl, 3)
    assert store.jobs.get(job).state == JobState.QUEUED
    clock.advance(21)
    ctl.run_cycle()
    assert store.jobs.get(job).state == JobState.SCHEDULED


def test_a_deep_queue_is_rewritten_only_where_it_changed_by_more_than_the_slack(
    store, engine, clock
):
    """One more job behind 60: the queue's length moved by less than 5 %, no place moved,
    so the 60 rows stay as they were (one UPDATE: the new job's reason); three more, and
    the length moved by 5 %: every row is rewritten."""
    ctl = Controller(store, engine, clock)
    ids = [submit(store, 8, f"j{i}") for i in range(60)]
    ctl.run_cycle()
    updated: list[int] = []  # rows each UPDATE of pending reasons wrote (executemany: many)
    event.listen(store.engine, "before_cursor_execute",
                 lambda _c, _cur, sql, params, _ctx, many: updated.append(
                     len(params) if many else 1)
                 if sql.startswith("UPDATE jobs SET pending") else None)  # fmt: skip
    late = submit(store, 8, "late")
    ctl.run_cycle()
    assert sum(updated) == 1
    first, last = store.jobs.get(ids[0]), store.jobs.get(late)
    assert first.pending_reason.endswith("(1st of 60 in tenant default)")
    assert last.pending_reason.endswith("(61st of 61 in tenant default)")
    for i in range(3):
        submit(store, 8, f"later{i}")
    updated.clear()
    ctl.run_cycle()
    assert sum(updated) == 64
    assert store.jobs.get(ids[0]).pending_reason.endswith("(1st of 64 in tenant default)")
    assert cycles(ctl) == 1


def test_running_tasks_are_polled_on_a_hint_and_every_few_seconds(store, engine, clock):
    """Once the engine's hints are taken, a running task's status is read when a hint says
    a task started or ended, and every FULL_POLL_S (a lost hint, a killed supervisor), not
    every cycle; a starting task is read every cycle (what it waits for comes unhinted)."""
    ctl = Controller(store, engine, clock)
    ctl.watch_engine()
    job = submit(store, 1)
    ctl.run_cycle()
    (key,) = engine.keys_on(job)
    polled: list[str] = []
    real_status = engine.status
    engine.status = lambda node, k: polled.append(k) or real_status(node, k)  # type: ignore
    ctl.run_cycle()  # starting: read every cycle
    engine.run(key)
    ctl.run_cycle()
    assert polled == [key, key] and store.jobs.get(job).state == JobState.RUNNING
    polled.clear()
    ctl.run_cycle()
    ctl.run_cycle()
    assert polled == []  # running, no hint: not read
    engine.exit(key, 0, "Completed")
    clock.advance(FULL_POLL_S)  # a lost hint: seen at the next full poll
    ctl.run_cycle()
    assert polled == [key] and store.jobs.get(job).state == JobState.SUCCEEDED
    other = submit(store, 1)
    ctl.run_cycle()
    (key2,) = engine.keys_on(other)
    engine.run(key2)
    ctl.run_cycle()
    engine.exit(key2, 1, "Error")
    engine.on_change()  # the hint
    ctl.run_cycle()
    assert store.jobs.get(other).state == JobState.FAILED
