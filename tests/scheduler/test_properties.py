"""Property tests (hypothesis) of the multi-tenant cycle on random clusters and workloads."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from builders import make_job, make_node, make_running, make_tenant
from gpuyard.model import RunningJob
from gpuyard.scheduler import ClusterView, Scheduler, SchedulerConfig

TENANTS = ("a", "b", "c")


@st.composite
def clusters(draw):
    nodes = [
        make_node(f"n{i}", gpus=draw(st.integers(0, 8)), cpu=draw(st.integers(2, 32)))
        for i in range(draw(st.integers(1, 4)))
    ]
    total = sum(len(n.gpus) for n in nodes)
    tenants = [
        make_tenant(
            t, draw(st.integers(0, total)), borrowing_limit=draw(st.none() | st.integers(0, 8))
        )
        for t in TENANTS[: draw(st.integers(0, 3))]
    ]
    return nodes, tenants


@st.composite
def workloads(draw, n_max=12):
    jobs = []
    for i in range(draw(st.integers(1, n_max))):
        jobs.append(
            make_job(
                f"j{i}",
                gpus=draw(st.integers(0, 4)),
                tasks=draw(st.integers(1, 3)),
                cpu=draw(st.integers(1, 8)),
                priority=draw(st.integers(0, 2)),
                tenant=draw(st.sampled_from(TENANTS)),
                owner=draw(st.sampled_from(("u1", "u2"))),
            )
        )
    return jobs


def view(nodes, tenants, running=(), queued=(), now=100.0):
    return ClusterView(
        tuple(nodes), {t.name: t for t in tenants}, tuple(running), tuple(queued), {}, now
    )


@settings(max_examples=150, deadline=None)
@given(clusters(), workloads())
def test_nothing_over_allocated_and_gangs_atomic(cluster, queued):
    nodes, tenants = cluster
    result = Scheduler().cycle(view(nodes, tenants, queued=queued))
    by_id = {j.job_id: j for j in queued}
    gpus, cpu = Counter(), Counter()
    for p in result.admit:
        assert len(p.tasks) == len(by_id[p.job_id].tasks)
        for t in p.tasks:
            assert len(t.gpu_indices) == t.resources.gpus
            gpus.update((t.node, i) for i in t.gpu_indices)
            cpu[t.node] += t.resources.cpu_milli
    assert all(n == 1 for n in gpus.values())
    capacity = {n.name: n.cpu_milli for n in nodes}
    assert all(used <= capacity[node] for node, used in cpu.items())
    assert set(result.pending_reasons) | {p.job_id for p in result.admit} == set(by_id)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 8), st.integers(1, 8), st.integers(0, 2))
def test_guarantee_is_reclaimed_within_one_cycle_plus_grace(guarantee, size, spare_nodes):
    size = min(size, guarantee)
    nodes = [make_node(f"n{i}", gpus=8) for i in range(1 + spare_nodes)]
    tenants = [make_tenant("a", guarantee), make_tenant("b", 0)]
    running = [
        make_running(f"b{n.name}{i}", "b", n.name, i, borrowed=1, started_at=i)
        for n in nodes
        for i in range(8)
    ]
    job = make_job("ja", gpus=size, tenant="a")
    scheduler = Scheduler()
    first = scheduler.cycle(view(nodes, tenants, running, [job]))
    assert not first.admit and first.preempt
    victims = {p.job_id for p in first.preempt}
    assert len(victims) == size
    left = [r for r in running if r.job_id not in victims]
    second = scheduler.cycle(view(nodes, tenants, left, [job], now=100 + 30))
    assert [p.job_id for p in second.admit] == ["ja"]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 8), st.integers(1, 5), st.integers(0, 3)), min_size=5, max_size=25
    )
)
def test_no_job_starves(stream):
    """Jobs (gpus, duration, priority) arrive one per cycle on 8 GPUs; with aging every one
    starts within a bounded number of cycles."""
    config = SchedulerConfig(aging_s=10)
    scheduler, nodes = Scheduler(config), [make_node("n1", gpus=8)]
    queued = {}
    running: dict[str, tuple[RunningJob, float]] = {}
    started: dict[str, float] = {}
    bound = 10 + 5 * len(stream) + 20
    for now in range(bound):
        if now < len(stream):
            gpus, _, priority = stream[now]
            queued[f"j{now}"] = make_job(f"j{now}", gpus=gpus, priority=priority, submitted_at=now)
        running = {k: v for k, v in running.items() if v[1] > now}
        result = scheduler.cycle(
            view(nodes, [], [r for r, _ in running.values()], list(queued.values()), float(now))
        )
        for p in result.admit:
            duration = stream[int(p.job_id[1:])][1]
            running[p.job_id] = (RunningJob(p.job_id, "default", p.tasks, now), now + duration)
            started[p.job_id] = now
            del queued[p.job_id]
    assert not queued
