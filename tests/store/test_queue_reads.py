"""`in_states` reuses the records of rows that did not change since its last read (the
API's queue and metrics read whole states; the controller reads only what changed,
controller/mirror.py) and never serves a stale one; `set_pending`
writes only the reasons that changed."""

from __future__ import annotations

from gpuyard.model import JobState
from gpuyard.store import NewJob, Pending


def new_job(name: str) -> NewJob:
    return NewJob(name, "red", 0, 0, {"name": name, "tenant": "red"}, owner="alice")


def test_an_unchanged_row_keeps_its_record_and_every_change_is_read(store):
    a, b, c = (store.jobs.submit(new_job(n)) for n in "abc")
    first = {j.id: j for j in store.jobs.in_states(JobState.QUEUED)}
    store.jobs.set_priority(b.id, 5, "alice")
    store.jobs.hold(c.id, "alice", Pending("Held", "held by alice"))
    second = {j.id: j for j in store.jobs.in_states(JobState.QUEUED)}
    assert second[a.id] is first[a.id]  # nothing changed: not parsed again
    assert second[b.id].priority == 5 and second[b.id].spec["priority"] == 5
    assert second[c.id].held_by == "alice" and second[c.id].pending_code == "Held"
    store.jobs.move(a.id, JobState.STOPPED, "Cancelled")
    assert [j.id for j in store.jobs.in_states(JobState.QUEUED)] == [b.id, c.id]
    assert [j.id for j in store.jobs.in_states(JobState.STOPPED)] == [a.id]


def test_set_pending_writes_what_changed_and_skips_jobs_no_longer_queued(store):
    a, b = store.jobs.submit(new_job("a")), store.jobs.submit(new_job("b"))
    waiting = Pending("Quota", "over the tenant's quota", 1, 2, None, None)
    store.jobs.set_pending({a.id: waiting, b.id: waiting})
    store.jobs.move(b.id, JobState.STOPPED, "Cancelled")
    moved = Pending("Quota", "over the tenant's quota", 1, 1, None, None)
    store.jobs.set_pending({a.id: moved, b.id: moved})
    assert store.jobs.get(a.id).pending == moved
    assert store.jobs.get(b.id).pending is None  # ended: not waiting, nothing written
