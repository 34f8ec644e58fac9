"""The real controller, store and scheduler on a fake cluster, driven cycle by cycle."""

from __future__ import annotations

import pytest

from builders import make_node
from fake_engine import FakeEngine
from gpuyard.controller import Controller
from gpuyard.model import FlavorQuota, JobState, ManualClock, TaskState, Tenant
from gpuyard.runtime.errors import ImageError, LaunchInvalid, RuntimeStartError
from gpuyard.spec import parse_job_spec
from gpuyard.store import NewJob, Store


@pytest.fixture
def engine() -> FakeEngine:
    return FakeEngine(make_node("n1", gpus=4), make_node("n2", gpus=4))


@pytest.fixture
def ctl(store: Store, engine: FakeEngine, clock: ManualClock) -> Controller:
    return Controller(store, engine, clock, stop_grace_s=5)


def submit(store: Store, *, tasks: int = 1, gpus: int = 1, retry: int = 0, **extra) -> str:
    doc = {
        "name": "t",
        "retryCount": retry,
        "taskRoles": {"worker": {"taskNumber": tasks, "gpuNumber": gpus, "command": "true"}},
        **extra,
    }
    spec = parse_job_spec(doc)
    job = NewJob(spec.name, spec.tenant, spec.priority, spec.retry_count, spec.to_document())
    return store.jobs.submit(job).id


def state(store: Store, job_id: str) -> JobState:
    job = store.jobs.get(job_id)
    assert job is not None
    return job.state


def test_a_job_runs_to_success_and_is_released(ctl, store, engine):
    jid = submit(store, gpus=2)
    ctl.run_cycle()
    assert state(store, jid) == JobState.SCHEDULED
    (key,) = engine.keys_on(jid)
    assert len(engine.launched[key].gpus) == 2
    engine.run(key)
    ctl.run_cycle()
    assert state(store, jid) == JobState.RUNNING
    engine.exit(key, 0, "Completed")
    ctl.run_cycle()
    ctl.run_cycle()
    job = store.jobs.get(jid)
    assert job.state == JobState.SUCCEEDED and job.reason == "Completed"
    assert engine.released == [key]
    moves = [(e.from_state, e.to_state) for e in store.jobs.events(jid) if e.task is None]
    assert moves == [
        (None, "QUEUED"),
        ("QUEUED", "SCHEDULED"),
        ("SCHEDULED", "RUNNING"),
        ("RUNNING", "SUCCEEDED"),
    ]


def test_user_failure_is_retried_retry_count_times_then_fails(ctl, store, engine):
    jid = submit(store, retry=2)
    for attempt in (1, 2, 3):
        ctl.run_cycle()
        job = store.jobs.get(jid)
        assert job.attempt == attempt
        key = engine.keys_on(jid)[-1]
        assert engine.launched[key].attempt == attempt
        engine.run(key)
        engine.exit(key, 3, "Error(exit 3)")
        ctl.run_cycle()
    job = store.jobs.get(jid)
    assert job.state == JobState.FAILED
    assert job.reason == "Error(exit 3)"
    assert job.retries_used == 2
    assert len(store.jobs.tasks(jid)) == 3


def test_lost_node_is_retried_without_counting(ctl, store, engine):
    jid = submit(store, retry=0)
    ctl.run_cycle()
    (key,) = engine.keys_on(jid)
    engine.run(key)
    ctl.run_cycle()
    engine.lose_node(engine.node_of[key])
    ctl.run_cycle()
    job = store.jobs.get(jid)
    assert job.state in (JobState.QUEUED, JobState.SCHEDULED)
    assert job.attempt == 2 and job.retries_used == 0
    first = [t for t in store.jobs.tasks(jid) if t.attempt == 1][0]
    assert first.reason == "NodeLost"


def test_cancel_a_running_job_stops_its_tasks_with_the_grace_period(ctl, store, engine):
    jid = submit(store, tasks=2)
    ctl.run_cycle()
    keys = engine.keys_on(jid)
    for k in keys:
        engine.run(k)
    ctl.run_cycle()
    store.jobs.request_stop(jid, "Cancelled")
    ctl.run_cycle()
    assert engine.stopped == {k: 5 for k in keys}
    for k in keys:
        engine.exit(k, 143, "Signal(SIGTERM)")
    ctl.run_cycle()
    job = store.jobs.get(jid)
    assert job.state == JobState.STOPPED and job.reason == "Cancelled"
    assert {t.reason for t in store.jobs.tasks(jid)} == {"Cancelled"}


def test_cancel_a_queued_job(ctl, store):
    jid = submit(store, gpus=16)
    ctl.run_cycle()
    assert state(store, jid) == JobState.QUEUED
    store.jobs.request_stop(jid, "Cancelled")
    ctl.run_cycle()
    assert state(store, jid) == JobState.STOPPED


def test_max_runtime_times_out(ctl, store, engine, clock):
    jid = submit(store, maxRuntime="1m")
    ctl.run_cycle()
    (key,) = engine.keys_on(jid)
    engine.run(key)
    ctl.run_cycle()
    clock.advance(61)
    ctl.run_cycle()
    assert key in engine.stopped
    engine.exit(key, 137, "Signal(SIGKILL)")
    ctl.run_cycle()
    job = store.jobs.get(jid)
    assert job.state == JobState.FAILED and job.reason == "Timeout"


def test_a_failed_task_stops_its_gang(ctl, store, engine):
    jid = submit(store, tasks=2)
    ctl.run_cycle()
    a, b = engine.keys_on(jid)
    engine.run(a)
    engine.run(b)
    engine.exit(a, 1, "Error(exit 1)")
    ctl.run_cycle()
    assert b in engine.stopped
    engine.exit(b, 143, "Signal(SIGTERM)")
    ctl.run_cycle()
    job = store.jobs.get(jid)
    assert job.state == JobState.FAILED and job.reason == "Error(exit 1)"


def test_a_job_too_big_waits_with_a_reason_and_does_not_block(ctl, store, engine):
    big = submit(store, gpus=8)
    small = submit(store, gpus=1)
    ctl.run_cycle()
    job = store.jobs.get(big)
    assert job.state == JobState.QUEUED
    assert job.pending_code == "ExceedsNodeCapacity"
    assert "needs 8 GPUs on one node; no node has more than 4" in job.pending_reason
    assert state(store, small) == JobState.SCHEDULED


def test_an_exit_is_recorded_once(ctl, store, engine):
    jid = submit(store)
    ctl.run_cycle()
    (key,) = engine.keys_on(jid)
    engine.run(key)
    engine.exit(key, 0, "Completed")
    for _ in range(3):
        ctl.run_cycle()
    ends = [e for e in store.jobs.events(jid) if e.task and e.to_state == TaskState.SUCCEEDED]
    assert len(ends) == 1
    assert engine.released == [key]


def test_restart_adopts_running_tasks(store, engine, clock):
    jid = submit(store)
    Controller(store, engine, clock).run_cycle()
    (key,) = engine.keys_on(jid)
    engine.run(key)
    fresh = Controller(store, engine, clock)  # a new controller on the same store and nodes
    fresh.run_cycle()
    assert state(store, jid) == JobState.RUNNING
    engine.exit(key, 0, "Completed")
    fresh.run_cycle()
    assert state(store, jid) == JobState.SUCCEEDED
    assert len(store.jobs.tasks(jid)) == 1


def test_a_preempted_job_is_requeued_uncounted_and_resumes(ctl, store, engine):
    jid = submit(store, retry=0)
    ctl.run_cycle()
    (key,) = engine.keys_on(jid)
    engine.run(key)
    ctl.run_cycle()
    ctl.preempt(jid, grace_s=7)
    assert engine.stopped == {key: 7}
    engine.exit(key, 0, "Completed")  # it checkpointed on SIGTERM and exited
    ctl.run_cycle()
    job = store.jobs.get(jid)
    assert job.attempt == 2 and job.retries_used == 0 and job.stop_requested is None
    assert job.state in (JobState.QUEUED, JobState.SCHEDULED)
    first = [t for t in store.jobs.tasks(jid) if t.attempt == 1][0]
    assert (first.state, first.reason) == (TaskState.STOPPED, "Preempted")
    second = engine.launched[engine.keys_on(jid)[-1]]
    assert second.attempt == 2 and second.resumed


def test_cancel_wins_over_a_pending_preemption(ctl, store, engine):
    jid = submit(store)
    ctl.run_cycle()
    (key,) = engine.keys_on(jid)
    engine.run(key)
    ctl.run_cycle()
    ctl.preempt(jid, grace_s=7)
    store.jobs.request_stop(jid, "Cancelled")
    engine.exit(key, 143, "Signal(SIGTERM)")
    ctl.run_cycle()
    job = store.jobs.get(jid)
    assert job.state == JobState.STOPPED and job.reason == "Cancelled"


def test_a_lender_reclaims_its_quota_from_a_borrower(store, clock):
    engine = FakeEngine(make_node("n1", gpus=4))
    ctl = Controller(store, engine, clock)
    store.tenants.create(Tenant("a", quotas=(FlavorQuota("A100-80GB", 2),)))
    store.tenants.create(Tenant("b", quotas=(FlavorQuota("A100-80GB", 2),), preemption_grace_s=9))
    borrower = submit(store, gpus=4, tenant="b")
    ctl.run_cycle()
    (bkey,) = engine.keys_on(borrower)
    engine.run(bkey)
    ctl.run_cycle()
    assert store.jobs.get(borrower).opportunistic  # 2 of its 4 GPUs are a's
    owner = submit(store, gpus=2, tenant="a")
    ctl.run_cycle()
    assert engine.stopped == {bkey: 9}  # preempted with b's grace period
    assert store.jobs.get(owner).pending_code == "WaitingForPreemption"
    engine.exit(bkey, 0, "Completed")  # b checkpointed and left
    ctl.run_cycle()
    ctl.run_cycle()
    assert state(store, owner) == JobState.SCHEDULED
    again = store.jobs.get(borrower)
    assert again.attempt == 2 and again.retries_used == 0


def test_tasks_run_as_their_tenants_uid_unless_the_tenant_allows_root(store, clock):
    engine = FakeEngine(make_node("n1", gpus=4))
    ctl = Controller(store, engine, clock)
    store.tenants.create(Tenant("locked", quotas=(FlavorQuota("A100-80GB", 2),)))
    store.tenants.create(Tenant("trusted", quotas=(FlavorQuota("A100-80GB", 2),), allow_root=True))
    locked, trusted = submit(store, tenant="locked"), submit(store, tenant="trusted")
    ctl.run_cycle()
    uid = store.tenants.get("locked").tenant.uid
    assert uid is not None and uid != store.tenants.get("trusted").tenant.uid  # each its own
    assert engine.launched[engine.keys_on(locked)[0]].run_as == (uid, uid)
    assert engine.launched[engine.keys_on(trusted)[0]].run_as == (0, 0)


def test_max_runtime_counts_from_the_start_of_each_attempt(ctl, store, engine, clock):
    jid = submit(store, retry=1, maxRuntime="1m")
    ctl.run_cycle()
    (first,) = engine.keys_on(jid)
    engine.run(first)
    ctl.run_cycle()
    clock.advance(50)
    engine.exit(first, 1, "Error(exit 1)")
    ctl.run_cycle()  # retried as attempt 2, 50 s after the first attempt started
    second = engine.keys_on(jid)[-1]
    engine.now = clock.now()
    engine.run(second)
    ctl.run_cycle()
    clock.advance(30)  # 80 s since the job first started, 30 s into this attempt
    ctl.run_cycle()
    assert second not in engine.stopped
    assert store.jobs.get(jid).state == JobState.RUNNING


@pytest.mark.parametrize(
    ("error", "state", "reason", "attempts"),
    [
        (
            LaunchInvalid("data dir /nope does not exist on this node"),
            JobState.FAILED,
            "InvalidSpec",
            1,
        ),
        (ImageError("image x:1 is not on this node"), JobState.FAILED, "ImageError", 1),
    ],
)
def test_a_launch_that_can_never_start_fails_at_once(
    ctl, store, engine, error, state, reason, attempts
):
    engine.start_error = error
    jid = submit(store, retry=3)
    for _ in range(3):
        ctl.run_cycle()
    job = store.jobs.get(jid)
    assert (job.state, job.reason, job.attempt) == (state, reason, attempts)
    assert str(error) in job.message


def test_a_start_the_node_could_not_do_is_retried_without_counting(ctl, store, engine):
    engine.start_error = RuntimeStartError("cannot spawn the supervisor: out of pids")
    jid = submit(store, retry=0)
    ctl.run_cycle()
    ctl.run_cycle()
    job = store.jobs.get(jid)
    assert job.attempt >= 2 and job.retries_used == 0 and job.state != JobState.FAILED
