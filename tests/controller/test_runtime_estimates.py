"""Preemption counts and learned run times in the live controller: counted in the store (and
from the events of an older store, migration 0008), learned from succeeded jobs at the start
and as jobs end, given to the scheduler's view, and behind a waiting job's estimated start."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command

from builders import make_node
from fake_engine import FakeEngine
from gpuyard.controller import Controller
from gpuyard.controller.runtimes import LearnedRuntimes
from gpuyard.controller.view import ViewBuilder
from gpuyard.model import FlavorQuota, ManualClock, Tenant
from gpuyard.spec import parse_job_spec
from gpuyard.store import NewJob, Store, open_store
from gpuyard.store.db import alembic_config, make_engine, sqlite_url

RAN_S = 600.0


def submit(store: Store, name: str = "train", gpus: int = 4, **extra) -> str:
    doc = {
        "name": name,
        "taskRoles": {"worker": {"taskNumber": 1, "gpuNumber": gpus, "command": "true"}},
        **extra,
    }
    spec = parse_job_spec(doc)
    job = NewJob(spec.name, spec.tenant, 0, 0, spec.to_document(), owner="ana")
    return store.jobs.submit(job).id


def advance(clock: ManualClock, engine: FakeEngine, seconds: float) -> None:
    clock.advance(seconds)
    engine.now = clock.now()


def start(ctl: Controller, engine: FakeEngine, job_id: str) -> str:
    ctl.run_cycle()
    key = engine.keys_on(job_id)[-1]
    engine.run(key)
    ctl.run_cycle()
    return key


def run_to_success(ctl: Controller, engine: FakeEngine, clock: ManualClock, job_id: str) -> None:
    key = start(ctl, engine, job_id)
    advance(clock, engine, RAN_S)
    engine.exit(key, 0, "Completed")
    ctl.run_cycle()


def preempt(ctl: Controller, engine: FakeEngine, job_id: str) -> None:
    key = start(ctl, engine, job_id)
    ctl.preempt(job_id, grace_s=1)
    engine.exit(key, 0, "Completed")  # it checkpointed on SIGTERM
    ctl.run_cycle()


@pytest.fixture
def engine(clock: ManualClock) -> FakeEngine:
    return FakeEngine(make_node("n1", gpus=4), now=clock.now())


def test_preemptions_are_counted_and_given_to_the_view(store, engine, clock):
    ctl = Controller(store, engine, clock)
    job_id = submit(store)
    for _ in range(2):
        preempt(ctl, engine, job_id)  # requeued, and bound again in the same cycle
    job = store.jobs.get(job_id)
    assert (job.preemptions, job.attempt) == (2, 3)
    views = ViewBuilder(store, ctl.jobs, lambda j: parse_job_spec(j.spec), ctl.runtimes)
    now_read = (engine.nodes(), store.tenants.tenants(), store.jobs.active_tasks())
    (demand,) = views.build(*now_read, [job], clock.now()).queued
    (running,) = views.build(*now_read, [], clock.now()).running
    assert (demand.preemptions, running.preemptions) == (2, 2)


EVENT = "INSERT INTO events (job_id, time, attempt, task, from_state, to_state, reason) VALUES "


@pytest.mark.sqlite_only
def test_the_migration_counts_preemptions_from_the_events(tmp_path: Path):
    engine = make_engine(sqlite_url(tmp_path))
    cfg = alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0007")
        conn.execute(
            sa.text(
                "INSERT INTO jobs (id, seq, name, tenant, state, priority, attempt, retry_count,"
                " retries_used, spec, submitted_at, borrowed, platform_failures)"
                " VALUES ('j', 1, 'j', 'default', 'QUEUED', 0, 3, 0, 0, '{}', 0, '[]', 0)"
            )
        )
        for values in (
            "('j', 1, 1, NULL, 'RUNNING', 'QUEUED', 'Preempted')",
            "('j', 2, 2, NULL, 'RUNNING', 'QUEUED', 'NodeLost')",
            "('j', 3, 2, 'worker/0', 'RUNNING', 'STOPPED', 'Preempted')",  # a task's end
        ):
            conn.execute(sa.text(EVENT + values))
        command.upgrade(cfg, "head")
    store = open_store(tmp_path)
    assert store.jobs.get("j").preemptions == 1
    store.close()
    engine.dispose()


def test_run_times_are_learned_from_succeeded_jobs(store, engine, clock):
    ctl = Controller(store, engine, clock)
    done = submit(store)
    run_to_success(ctl, engine, clock, done)
    record = store.jobs.get(done)
    learned = ctl.runtimes.estimate(record)
    assert (learned.seconds, learned.basis, learned.samples) == (RAN_S, "name", 1)
    failed = submit(store, name="other")
    key = start(ctl, engine, failed)
    engine.exit(key, 1, "Error(exit 1)")
    ctl.run_cycle()
    assert ctl.runtimes.learned == 1  # a failed job teaches nothing
    again = Controller(store, FakeEngine(make_node("n1", gpus=4)), clock)  # loads at start
    assert again.runtimes.estimate(record) == learned


@pytest.mark.parametrize(
    ("max_runtime_s", "history", "want"),
    [
        pytest.param(None, False, None, id="nothing-known"),
        pytest.param(300, False, 300.0, id="max-runtime-only"),
        pytest.param(None, True, RAN_S, id="history-only"),
        pytest.param(300, True, 300.0, id="max-runtime-shorter"),
        pytest.param(900, True, RAN_S, id="history-shorter"),
    ],
)
def test_expected_run_time(store, engine, clock, max_runtime_s, history, want):
    if history:
        run_to_success(Controller(store, engine, clock), engine, clock, submit(store))
    record = store.jobs.get(submit(store))
    assert LearnedRuntimes(store).expected_s(record, max_runtime_s) == want


def test_a_waiting_job_starts_when_the_learned_run_time_ends(store, engine, clock):
    ctl = Controller(store, engine, clock)
    run_to_success(ctl, engine, clock, submit(store))
    first = submit(store)
    start(ctl, engine, first)
    started = clock.now()
    advance(clock, engine, 60)
    waiting = submit(store, name="eval")
    ctl.run_cycle()
    job = store.jobs.get(waiting)
    assert job.pending_eta == started + RAN_S
    assert job.pending_eta_basis == "the run times of 1 running job: 1 learned from history"
    assert f"estimated start in 9 min (from {job.pending_eta_basis})" in job.pending_reason


def test_a_reclaims_estimate_rests_on_the_grace_period(store, clock):
    engine = FakeEngine(make_node("n1", gpus=4), now=clock.now())
    ctl = Controller(store, engine, clock)
    store.tenants.create(Tenant("a", quotas=(FlavorQuota("A100-80GB", 2),)))
    store.tenants.create(Tenant("b", quotas=(FlavorQuota("A100-80GB", 2),), preemption_grace_s=9))
    borrower = submit(store, tenant="b")
    start(ctl, engine, borrower)
    owner = submit(store, gpus=2, tenant="a")
    ctl.run_cycle()
    job = store.jobs.get(owner)
    assert job.pending_code == "WaitingForPreemption"
    assert (job.pending_eta, job.pending_eta_basis) == (
        clock.now() + 9,
        "the preempted jobs' grace period",
    )
