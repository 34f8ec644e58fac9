"""Platform failures are retried with exponential backoff and end as PlatformError after a cap;
a failure the spec causes is never retried (issue 15, finding 4: a start that failed for the
spec's reason was an AgentError, retried 2-8 times a second forever)."""

from __future__ import annotations

import pytest

from builders import make_node
from fake_engine import FakeEngine
from gpuyard.controller import Controller
from gpuyard.controller.lifecycle import Backoff
from gpuyard.controller.loop import BACKOFF
from gpuyard.model import JobState, ManualClock, TaskReason
from gpuyard.runtime.errors import LaunchInvalid, RuntimeStartError
from gpuyard.spec import parse_job_spec
from gpuyard.store import NewJob, Store

BACKOFF_RULE = Backoff(base_s=2.0, max_s=10.0, cap=4, healthy_s=60.0)


@pytest.fixture
def engine() -> FakeEngine:
    return FakeEngine(make_node("n1", gpus=4))


@pytest.fixture
def ctl(store: Store, engine: FakeEngine, clock: ManualClock) -> Controller:
    return Controller(store, engine, clock, backoff=BACKOFF_RULE)


def submit(store: Store) -> str:
    spec = parse_job_spec({"name": "t", "taskRoles": {"w": {"gpuNumber": 1, "command": "true"}}})
    job = NewJob(spec.name, spec.tenant, spec.priority, spec.retry_count, spec.to_document())
    return store.jobs.submit(job).id


def test_failed_starts_back_off_exponentially_then_end_as_platform_error(ctl, store, engine, clock):
    engine.start_error = RuntimeStartError("the node's disk is full")
    jid = submit(store)
    ctl.run_cycle()  # the start fails: attempt 1 ends AgentError
    waits = []
    for _ in range(BACKOFF_RULE.cap):
        ctl.run_cycle()  # settled: back to the queue with a delay
        job = store.jobs.get(jid)
        assert job is not None and job.state == JobState.QUEUED and job.not_before is not None
        waits.append(job.not_before - clock.now())
        for _ in range(3):  # not placed while it backs off, and it says why
            ctl.run_cycle()
        waiting = store.jobs.get(jid)
        assert waiting.pending_code == BACKOFF and "None" not in (waiting.pending_reason or "")
        assert store.jobs.get(jid).attempt == job.attempt
        clock.advance(job.not_before - clock.now())
        ctl.run_cycle()  # placed again, fails again
    ctl.run_cycle()
    job = store.jobs.get(jid)
    assert waits == [2.0, 4.0, 8.0, 10.0]
    assert job.state == JobState.FAILED and job.reason == TaskReason.PLATFORM_ERROR, job
    assert "disk is full" in (job.message or "")
    assert job.attempt == BACKOFF_RULE.cap + 1


def test_a_launch_the_spec_makes_impossible_fails_once(ctl, store, engine):
    engine.start_error = LaunchInvalid("outputDir /r/f/x: component 'f' is not a directory")
    jid = submit(store)
    for _ in range(5):
        ctl.run_cycle()
    job = store.jobs.get(jid)
    assert job.state == JobState.FAILED and job.reason == TaskReason.INVALID_SPEC
    assert job.attempt == 1 and job.not_before is None


def test_an_attempt_that_ran_long_enough_starts_the_count_anew(ctl, store, engine, clock):
    jid = submit(store)
    for _ in range(BACKOFF_RULE.cap + 2):  # node losses after healthy runs: no PlatformError
        ctl.run_cycle()
        (key,) = [k for k in engine.keys_on(jid) if k in engine.status_of]
        engine.now = clock.now()
        engine.run(key)
        ctl.run_cycle()
        clock.advance(BACKOFF_RULE.healthy_s + 1)
        engine.status_of.pop(key)  # the node has no trace of it: NodeLost
        ctl.run_cycle()
        ctl.run_cycle()
        job = store.jobs.get(jid)
        assert job.state == JobState.QUEUED and job.platform_failures == 1, job
        clock.advance(BACKOFF_RULE.base_s)
