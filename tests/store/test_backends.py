"""What SQLite and PostgreSQL could disagree on, run on both: the migrations down and up
again, submission order under concurrent submits, name globs (case, `%` and `_`), booleans,
floats, grouped counts and sums, port reservations, non-ASCII text, and a job changed by two
writers at once."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from alembic import command

from builders import make_node
from gpuyard.model import JobState, TaskReason, TaskState
from gpuyard.store import JobFilter, JobNotQueued, NewJob, NewTask, Pending, PortRequest
from gpuyard.store.db import alembic_config


def new_job(name: str = "train", tenant: str = "red", owner: str | None = "alice") -> NewJob:
    return NewJob(name, tenant, 0, 0, {"name": name, "tenant": tenant}, owner=owner)


def bound(store, job_id: str, gpus: tuple[int, ...] = (0,)) -> list:
    return store.jobs.bind(job_id, 1, [NewTask("worker", 0, "n1", gpus, 1000, 1024)])


def test_the_migrations_go_down_to_nothing_and_up_again(store):
    store.jobs.submit(new_job())
    cfg = alembic_config()
    with store.engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "base")
        command.upgrade(cfg, "head")
    assert store.jobs.list() == []
    assert store.jobs.submit(new_job()).seq == 1


def test_concurrent_submits_get_distinct_increasing_seqs(store):
    with ThreadPoolExecutor(8) as pool:
        jobs = list(pool.map(lambda i: store.jobs.submit(new_job(f"j{i}")), range(80)))
    seqs = sorted(j.seq for j in jobs)
    assert len(set(seqs)) == 80
    listed = store.jobs.list(limit=1000)
    assert [j.seq for j in listed] == sorted((j.seq for j in listed), reverse=True)


def test_name_globs_are_case_insensitive_and_literal_for_percent_and_underscore(store):
    for name in ("Train-A", "train-b", "eval_1", "evalX1", "100%", "1000", "ünïcode-é"):
        store.jobs.submit(new_job(name))

    def names(glob: str) -> set[str]:
        return {j.name for j in store.jobs.find(JobFilter(name_glob=glob))}

    assert names("train-*") == {"Train-A", "train-b"}
    assert names("eval_1") == {"eval_1"}
    assert names("eval?1") == {"eval_1", "evalX1"}
    assert names("100%") == {"100%"}
    assert names("ÜNÏCODE-*") | names("ünïcode-*") == {"ünïcode-é"}


def test_floats_round_trip_and_sums_group_by_tenant(store, clock):
    clock.advance(0.123456789)
    job = store.jobs.submit(new_job())
    assert store.jobs.get(job.id).submitted_at == 1_000_000.123456789
    other = store.jobs.submit(new_job(tenant="blue"))
    store.jobs.move(other.id, JobState.STOPPED, "Cancelled")
    assert store.jobs.counts() == {("red", JobState.QUEUED): 1, ("blue", JobState.STOPPED): 1}
    assert store.jobs.preemptions_by_tenant() == {"red": 0, "blue": 0}


def test_booleans_and_task_ends_and_run_times(store, clock):
    store.nodes.record([make_node("n1")], "local")
    job = store.jobs.submit(new_job())
    (task,) = bound(store, job.id)
    assert task.stop_sent is False
    store.jobs.stop_sent([task.id])
    assert store.jobs.tasks(job.id)[0].stop_sent is True
    assert store.nodes.list()[0].schedulable is True
    store.jobs.task_running(task.id, clock.now())
    store.jobs.move(job.id, JobState.RUNNING, None)
    clock.advance(30.5)
    assert store.jobs.task_ended(
        task.id, TaskState.SUCCEEDED, 0, TaskReason.COMPLETED, None, clock.now()
    )
    assert not store.jobs.task_ended(
        task.id, TaskState.FAILED, 1, "Error(exit 1)", None, clock.now()
    )
    store.jobs.move(job.id, JobState.SUCCEEDED, TaskReason.COMPLETED)
    (ran,) = store.usage.run_times()
    assert ran.runtime_s == 30.5
    assert store.usage.by_tenant(0.0, clock.now()) == {"red": 30.5}


def test_ports_are_the_lowest_free_and_freed_with_their_task(store, clock):
    store.nodes.record([make_node("n1")], "local")
    first, second = (store.jobs.submit(new_job(f"j{i}")) for i in range(2))
    (t1,) = bound(store, first.id, (0,))
    (t2,) = bound(store, second.id, (1,))
    got = store.nodes.reserve_ports([PortRequest(t1.id, "n1", (("http", 2),))], (9000, 9009))
    assert got == {t1.id: (("http", (9000, 9001)),)}
    store.jobs.task_ended(t1.id, TaskState.FAILED, 1, "Error(exit 1)", None, clock.now())
    again = store.nodes.reserve_ports([PortRequest(t2.id, "n1", (("http", 1),))], (9000, 9009))
    assert again == {t2.id: (("http", (9000,)),)}
    assert store.nodes.held_ports("n1") == {9000: t2.id}


def test_pending_details_are_written_and_cleared(store):
    job = store.jobs.submit(new_job())
    store.jobs.set_pending({job.id: Pending("NoFit", "needs 8 GPUs", 1, 3, 1_000_100.5, "x")})
    got = store.jobs.get(job.id).pending
    assert (got.code, got.position, got.queue_length, got.eta) == ("NoFit", 1, 3, 1_000_100.5)
    bound(store, job.id)
    assert store.jobs.get(job.id).pending is None


def hold_and_bind_at_once(store, job_id: str) -> list[object]:
    """The API's hold and the controller's bind of one job, released together."""
    start = threading.Barrier(2)
    results: list[object] = []

    def hold() -> None:
        start.wait()
        try:
            results.append(store.jobs.hold(job_id, "alice", Pending("Held", "held")))
        except JobNotQueued as e:  # the bind went first
            results.append(e)

    def bind() -> None:
        start.wait()
        results.append(bound(store, job_id))

    threads = [threading.Thread(target=hold), threading.Thread(target=bind)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_a_hold_and_a_bind_at_once_leave_the_job_consistent(store):
    """Whichever of two writers on one job goes second sees the first's outcome: a job is
    never both scheduled and held."""
    for i in range(10):
        job = store.jobs.submit(new_job(f"race{i}"))
        results = hold_and_bind_at_once(store, job.id)
        after = store.jobs.get(job.id)
        assert not (after.state == JobState.SCHEDULED and after.held_by), results
