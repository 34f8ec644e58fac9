"""A queued job's pending details in the store: code, sentence, position, queue length and
estimated start are written when they change and cleared when the job is bound or ends."""

from __future__ import annotations

from sqlalchemy import event

from gpuyard.model import JobState, ManualClock
from gpuyard.store import NewJob, NewTask, Pending, open_store


def new_job(name: str) -> NewJob:
    return NewJob(name, "default", 0, 0, {"name": name, "taskRoles": {}})


def test_pending_details_are_stored_changed_only_and_cleared(tmp_path):
    store = open_store(tmp_path, clock=ManualClock(100.0))
    jobs = store.jobs
    a, b = jobs.submit(new_job("a")), jobs.submit(new_job("b"))
    updates: list[str] = []
    event.listen(
        store.engine,
        "before_cursor_execute",
        lambda _c, _cur, sql, *_: updates.append(sql) if sql.startswith("UPDATE") else None,
    )
    first = Pending("InsufficientResources", "needs 2 GPUs (1st of 2)", 1, 2, 700.0)
    jobs.set_pending({a.id: first, b.id: Pending("WaitingForEarlierJob", "behind a", 2, 2)})
    got = jobs.get(a.id)
    assert got.pending == first
    assert (got.pending_position, got.pending_queue_length, got.pending_eta) == (1, 2, 700.0)
    assert jobs.get(b.id).pending_eta is None

    updates.clear()
    jobs.set_pending({a.id: Pending(first.code, first.message, 1, 2, 702.0)})  # within slack
    assert updates == [] and jobs.get(a.id).pending_eta == 700.0
    jobs.set_pending({a.id: Pending(first.code, first.message, 1, 1, 700.0)})
    assert len(updates) == 1 and jobs.get(a.id).pending_queue_length == 1

    jobs.bind(a.id, 1, [NewTask("main", 0, "n1", (0,), 1000, 100)])
    bound = jobs.get(a.id)
    assert bound.pending is None and bound.pending_position is None and bound.pending_eta is None
    ended = jobs.move(b.id, JobState.STOPPED, "Cancelled")
    assert ended.pending is None and ended.pending_queue_length is None
    store.close()
