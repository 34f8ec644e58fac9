"""Interactive jobs in the controller (docs/interactive.md), on the fake cluster with a
manual clock: the task holds the container open instead of running the command; a session's
end stops the job through the state machine (SUCCEEDED for exit 0, FAILED for another
code, STOPPED when the client went away), each move an event; a job with no session for its
tenant's `interactiveIdleTimeoutS` is stopped `SessionIdle`."""

from __future__ import annotations

import pytest

from builders import make_node
from fake_engine import FakeEngine
from gpuyard.controller import Controller
from gpuyard.controller.interactive import HOLD_COMMAND
from gpuyard.model import JobState, ManualClock, TaskReason, Tenant
from gpuyard.spec import parse_job_spec
from gpuyard.store import NewJob, Store


@pytest.fixture
def engine(clock: ManualClock) -> FakeEngine:
    return FakeEngine(make_node("n1", gpus=4), now=clock.now())


@pytest.fixture
def ctl(store: Store, engine: FakeEngine, clock: ManualClock) -> Controller:
    return Controller(store, engine, clock, stop_grace_s=5)


def submit(store: Store, interactive: bool = True, tenant: str = "default") -> str:
    doc = {"name": "shell", "tenant": tenant, "interactive": interactive,
           "taskRoles": {"main": {"gpuNumber": 1, "command": "python3 train.py"}}}
    spec = parse_job_spec(doc)
    job = NewJob(spec.name, spec.tenant, spec.priority, spec.retry_count, spec.to_document(),
                 owner="alice")
    return store.jobs.submit(job).id


def running(ctl: Controller, engine: FakeEngine, store: Store, job_id: str) -> str:
    """Schedule and start the job; its task's key."""
    ctl.run_cycle()
    (key,) = engine.keys_on(job_id)
    engine.run(key)
    ctl.run_cycle()
    assert store.jobs.get(job_id).state == JobState.RUNNING
    return key


def end_tasks(ctl: Controller, engine: FakeEngine, key: str) -> None:
    """The node saw the stop through (the holder leaves on SIGTERM with 0)."""
    ctl.run_cycle()  # enforce: the stop is sent
    assert key in engine.stopped
    engine.exit(key, 0, TaskReason.COMPLETED)
    ctl.run_cycle()  # observed, then settled


def moves(store: Store, job_id: str) -> list[tuple[str | None, str, str | None]]:
    return [(e.from_state, e.to_state, e.reason) for e in store.jobs.events(job_id)
            if e.task is None and e.from_state != e.to_state]


def test_the_task_holds_the_container_open_instead_of_running_the_command(ctl, engine, store):
    key = running(ctl, engine, store, submit(store))
    assert engine.launched[key].command == HOLD_COMMAND
    batch = submit(store, interactive=False)
    ctl.run_cycle()
    (batch_key,) = engine.keys_on(batch)
    assert engine.launched[batch_key].command == "python3 train.py"


@pytest.mark.parametrize(
    ("reason", "state", "message"),
    [
        ("SessionEnded(exit 0)", JobState.SUCCEEDED, "the session's command exited 0"),
        ("SessionEnded(exit 3)", JobState.FAILED, "the session's command exited 3"),
        ("SessionLost", JobState.STOPPED, "the session's client went away before its command "
                                          "ended"),
    ],
)
def test_the_sessions_end_decides_the_jobs(ctl, engine, store, reason, state, message):
    job_id = submit(store)
    key = running(ctl, engine, store, job_id)
    store.jobs.request_stop(job_id, reason)
    end_tasks(ctl, engine, key)
    job = store.jobs.get(job_id)
    assert (job.state, job.reason, job.message) == (state, reason, message)
    assert store.jobs.tasks(job_id)[0].reason == reason  # the task was stopped for it
    assert moves(store, job_id)[-1] == ("RUNNING", str(state), reason)
    assert job.attempt == 1  # never retried


def test_a_cancel_beats_the_session_end_it_causes_and_a_timeout_stays(ctl, engine, store):
    cancelled = submit(store)
    key = running(ctl, engine, store, cancelled)
    store.jobs.request_stop(cancelled, TaskReason.CANCELLED)
    store.jobs.request_stop(cancelled, TaskReason.session_ended(137))  # its command killed
    end_tasks(ctl, engine, key)
    assert store.jobs.get(cancelled).reason == TaskReason.CANCELLED
    timed_out = submit(store)
    store.jobs.request_stop(timed_out, TaskReason.TIMEOUT)
    assert store.jobs.request_stop(timed_out, "SessionEnded(exit 137)").stop_requested == "Timeout"
    lost = submit(store)
    store.jobs.request_stop(lost, TaskReason.PREEMPTED)
    assert store.jobs.request_stop(lost, TaskReason.SESSION_LOST).stop_requested == "SessionLost"


def test_a_job_nobody_attached_to_stops_after_the_default_timeout(ctl, engine, store, clock):
    job_id = submit(store)
    clock.advance(600)  # queued time does not count: the client waits for it
    engine.now = clock.now()
    key = running(ctl, engine, store, job_id)
    clock.advance(899)
    ctl.run_cycle()
    assert store.jobs.get(job_id).stop_requested is None
    clock.advance(1)
    ctl.run_cycle()
    assert store.jobs.get(job_id).stop_requested == TaskReason.SESSION_IDLE
    end_tasks(ctl, engine, key)
    job = store.jobs.get(job_id)
    assert (job.state, job.reason) == (JobState.STOPPED, TaskReason.SESSION_IDLE)
    (note,) = [e.message for e in store.jobs.events(job_id) if e.reason == "SessionIdle"
               and e.from_state == e.to_state]
    assert note == ("no session was ever attached: no session for 900 s (tenant default: "
                    "interactiveIdleTimeoutS 900)")


def test_the_timeout_counts_from_the_last_session_and_is_the_tenants(ctl, engine, store, clock):
    store.tenants.create(Tenant("short", interactive_idle_timeout_s=120))
    job_id = submit(store, tenant="short")
    key = running(ctl, engine, store, job_id)
    for _ in range(5):  # a session attached: its heartbeat keeps the job
        clock.advance(30)
        store.jobs.session_seen(job_id)
        ctl.run_cycle()
    assert store.jobs.get(job_id).stop_requested is None
    clock.advance(119)  # the last one went away
    ctl.run_cycle()
    assert store.jobs.get(job_id).stop_requested is None
    clock.advance(1)
    ctl.run_cycle()
    assert store.jobs.get(job_id).stop_requested == TaskReason.SESSION_IDLE
    assert key in engine.stopped
    notes = [e.message for e in store.jobs.events(job_id) if e.reason == "SessionIdle"]
    assert notes[0].startswith("its last session went away: no session for 120 s")


def test_a_batch_job_is_never_stopped_for_want_of_a_session(ctl, engine, store, clock):
    job_id = submit(store, interactive=False)
    running(ctl, engine, store, job_id)
    clock.advance(10 * 3600)
    ctl.run_cycle()
    assert store.jobs.get(job_id).stop_requested is None


def test_a_session_that_ended_teaches_no_run_time(ctl, engine, store, clock):
    job_id = submit(store)
    key = running(ctl, engine, store, job_id)
    clock.advance(3600)
    store.jobs.request_stop(job_id, TaskReason.session_ended(0))
    end_tasks(ctl, engine, key)
    assert store.jobs.get(job_id).state == JobState.SUCCEEDED
    assert ctl.runtimes.learned == 0
    assert ctl.runtimes.estimator.estimate("default", "alice", "shell") is None
