"""Job revisions (store/revisions.py): every change the controller acts on gives its rows a
new revision, read back by `changed_since`; the controller's own pending reasons and session
pings do not; a transaction that rolls back leaves no number behind."""

from __future__ import annotations

import pytest

from gpuyard.model import JobState
from gpuyard.store import JobAlreadyEnded, NewArray, NewJob, NewTask, Pending, open_store


def new_job(name: str) -> NewJob:
    return NewJob(name, "red", 0, 0, {"name": name, "tenant": "red"}, owner="alice")


def changed(store, since: int) -> list[tuple[str, JobState]]:
    return [(j.name, j.state) for j in store.jobs.changed_since(since)]


def test_each_change_gives_the_rows_it_touched_the_next_revision(store):
    start = store.jobs.revision()
    a = store.jobs.submit(new_job("a"))
    b = store.jobs.submit(new_job("b"))
    assert changed(store, start) == [("a", JobState.QUEUED), ("b", JobState.QUEUED)]
    seen = store.jobs.revision()
    assert seen == start + 2 and changed(store, seen) == []
    store.jobs.set_priority(b.id, 5, "alice")
    assert changed(store, seen) == [("b", JobState.QUEUED)]
    seen = store.jobs.revision()
    task = NewTask("main", 0, "n1", (0,), 1000, 512)
    store.jobs.bind(a.id, a.attempt, [task])
    (record,) = store.jobs.changed_since(seen)
    assert (record.id, record.state, record.rev) == (a.id, JobState.SCHEDULED, seen + 1)


def test_pending_reasons_and_session_pings_are_not_changes(store):
    a = store.jobs.submit(new_job("a"))
    seen = store.jobs.revision()
    store.jobs.set_pending({a.id: Pending("Quota", "over quota", 1, 1)})
    store.jobs.session_seen(a.id)
    assert store.jobs.revision() == seen and changed(store, seen) == []
    store.jobs.hold(a.id, "alice", Pending("Held", "held by alice"))  # a hold is one
    assert changed(store, seen) == [("a", JobState.QUEUED)]


def test_a_refused_change_takes_no_revision(store):
    a = store.jobs.submit(new_job("a"))
    store.jobs.move(a.id, JobState.STOPPED, "Cancelled")
    seen = store.jobs.revision()
    with pytest.raises(JobAlreadyEnded):
        store.jobs.set_priority(a.id, 3, "alice")
    assert store.jobs.revision() == seen


def test_batches_and_array_cancels_are_counted(store):
    start = store.jobs.revision()
    array = NewArray("sweep", "red", "alice", "0-2", None, [(i, new_job("c")) for i in range(3)])
    (stored,) = store.arrays.submit_all([array])
    rows = store.jobs.changed_since(start)
    assert len(rows) == 3 and {r.rev for r in rows} == {start + 1}
    assert store.arrays.cancel(stored.id) == 3
    assert {r.stop_requested for r in store.jobs.changed_since(start + 1)} == {"Cancelled"}


def test_another_servers_writes_are_read_in_order(store, tmp_path):
    """Two servers on one database (the API's and the leader's): what one writes, the other
    reads by revision, and a reader that saw revision n sees nothing new below it."""
    other = open_store(tmp_path, url=str(store.engine.url.render_as_string(hide_password=False)))
    try:
        seen = store.jobs.revision()
        a = other.jobs.submit(new_job("a"))
        other.jobs.request_stop(a.id, "Cancelled")
        (record,) = store.jobs.changed_since(seen)
        assert (record.id, record.stop_requested, record.rev) == (a.id, "Cancelled", seen + 2)
        assert store.jobs.changed_since(record.rev) == []
    finally:
        other.close()
