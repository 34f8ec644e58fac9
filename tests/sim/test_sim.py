"""The simulator on tiny traces whose answers are worked out by hand, determinism, loaders."""

from __future__ import annotations

import random

import pytest

from gpuyard.sim import SimConfig, Trace, TraceJob, load_csv, simulate
from gpuyard.sim.metrics import summarize
from gpuyard.sim.traces import demand_quotas, with_quotas


def tiny(jobs, quota, per_node=1) -> Trace:
    """`jobs` as (id, submit, duration, gpus, tenant); `quota` tenant → nodes."""
    trace_jobs = tuple(TraceJob(j, s, d, g, t) for j, s, d, g, t in jobs)
    return Trace("tiny", trace_jobs, {(t, "GPU"): n for t, n in quota.items()}, per_node)


def by_id(result):
    return {j.trace.job_id: j for j in result.jobs}


TWO_ON_ONE_GPU = tiny([("long", 0, 100, 1, "a"), ("short", 0, 10, 1, "a")], {"a": 1})


@pytest.mark.parametrize("policy", ["fifo", "fifo-backfill", "default", "las"])
def test_two_jobs_on_one_gpu_fifo_order(policy):
    # long arrived first: it runs 0–100, short 100–110; average JCT (100 + 110) / 2 = 105
    r = simulate(TWO_ON_ONE_GPU, SimConfig(policy=policy))
    jobs = by_id(r)
    assert (jobs["long"].first_start, jobs["long"].end) == (0, 100)
    assert (jobs["short"].first_start, jobs["short"].end) == (100, 110)
    assert summarize(r).avg_jct_s == 105


@pytest.mark.parametrize("policy", ["sjf-oracle", "srtf-oracle"])
def test_two_jobs_on_one_gpu_shortest_first(policy):
    # short runs 0–10, long 10–110; average JCT (10 + 110) / 2 = 60
    r = simulate(TWO_ON_ONE_GPU, SimConfig(policy=policy))
    jobs = by_id(r)
    assert (jobs["short"].end, jobs["long"].first_start, jobs["long"].end) == (10, 10, 110)
    assert summarize(r).avg_jct_s == 60


def test_srtf_preempts_a_longer_job_and_it_resumes_from_its_checkpoint():
    # long starts at 0; short (10 s) arrives at 50: long has 50 s left > 10, so it is
    # preempted (grace 5 s: stops at 55, checkpoint on SIGTERM), short runs 55–65, long
    # resumes at 65 with 45 s left and ends at 110
    trace = tiny([("long", 0, 100, 1, "a"), ("short", 50, 10, 1, "a")], {"a": 1})
    r = simulate(trace, SimConfig(policy="srtf-oracle", grace_s=5, checkpoint_s=0))
    jobs = by_id(r)
    assert (jobs["short"].first_start, jobs["short"].end) == (55, 65)
    assert (jobs["long"].end, jobs["long"].preemptions, jobs["long"].attempt) == (110, 1, 2)
    assert jobs["long"].lost_gpu_s == 0


def test_borrow_then_reclaim():
    # 2 nodes of 1 GPU; a and b are guaranteed one each. b's 2-GPU gang starts at 0,
    # borrowing a's GPU. a's job arrives at 100 and reclaims: b gets SIGTERM, stops at
    # 130 (grace 30), a runs 130–180, b restarts at 180 with its checkpointed work.
    trace = tiny([("b1", 0, 1000, 2, "b"), ("a1", 100, 50, 1, "a")], {"a": 1, "b": 1})
    r = simulate(trace, SimConfig(policy="default", grace_s=30, checkpoint_s=0))
    jobs = by_id(r)
    assert (jobs["a1"].first_start, jobs["a1"].end) == (130, 180)
    b1 = jobs["b1"]
    assert (b1.preemptions, b1.attempt, b1.lost_gpu_s) == (1, 2, 0)
    assert b1.end == 180 + (1000 - 130)


def test_work_since_the_last_checkpoint_is_lost():
    trace = tiny([("b1", 0, 1000, 2, "b"), ("a1", 100, 50, 1, "a")], {"a": 1, "b": 1})
    r = simulate(trace, SimConfig(policy="default", grace_s=30, checkpoint_s=60, seed=3))
    b1 = by_id(r)["b1"]
    phase = b1.phase_s
    saved = 0.0 if phase > 130 else phase + (130 - phase) // 60 * 60
    assert b1.lost_gpu_s == pytest.approx(2 * (130 - saved))
    assert b1.end == pytest.approx(180 + 1000 - saved)
    assert summarize(r).lost_gpu_h == pytest.approx(2 * (130 - saved) / 3600)


def test_fifo_capacity_never_borrows():
    # same jobs under YARN-CS FIFO: b's 2-GPU gang exceeds its 1-GPU guarantee, never runs
    trace = tiny([("b1", 0, 1000, 2, "b"), ("a1", 100, 50, 1, "a")], {"a": 1, "b": 1})
    r = simulate(trace, SimConfig(policy="fifo"))
    jobs = by_id(r)
    assert jobs["a1"].first_start == 100 and jobs["b1"].first_start is None
    assert r.unfinished == ["b1"]


def random_trace(
    seed: int,
    n: int = 300,
    *,
    mean_gap_s: float = 60.0,
    durations_s: tuple[float, float] = (60.0, 4000.0),
    gpus: tuple[int, ...] = (1, 1, 1, 2, 4, 8, 16),
    quotas: str = "demand:0.7",
) -> Trace:
    """`n` jobs of tenants a, b, c arriving at random (mean gap `mean_gap_s`), of uniform
    durations in `durations_s` and GPUs drawn from `gpus`, on 8-GPU nodes sized by `quotas`."""
    rng = random.Random(seed)
    t, jobs = 0.0, []
    for i in range(n):
        t += rng.expovariate(1 / mean_gap_s)
        size = rng.choice(gpus)
        jobs.append((f"j{i:04d}", t, rng.uniform(*durations_s), size, rng.choice("abc")))
    trace = tiny(jobs, {}, per_node=8)
    return with_quotas(trace, quotas, None)


@pytest.mark.parametrize("policy", ["default", "las", "srtf-oracle", "fifo"])
def test_same_seed_same_numbers(policy):
    trace = random_trace(1)
    a = summarize(simulate(trace, SimConfig(policy=policy, seed=7)))
    b = summarize(simulate(trace, SimConfig(policy=policy, seed=7)))
    fields = ("avg_jct_s", "p99_jct_s", "avg_queue_s", "makespan_s", "preemptions", "lost_gpu_h")
    assert [getattr(a, f) for f in fields] == [getattr(b, f) for f in fields]
    assert a.finished == a.jobs


def test_demand_quotas_cover_the_biggest_gang_and_the_load():
    trace = random_trace(2)
    quotas = demand_quotas(trace, 0.7)
    span = trace.jobs[-1].submit_s - trace.jobs[0].submit_s
    for (tenant, _), nodes in quotas.items():
        mine = [j for j in trace.jobs if j.tenant == tenant]
        load = sum(j.gpus * j.duration_s for j in mine) / span
        assert nodes * 8 >= max(j.gpus for j in mine)
        assert nodes * 8 * 0.7 >= load
        assert (nodes - 1) * 8 * 0.7 < load or (nodes - 1) * 8 < max(j.gpus for j in mine)


def test_generic_csv_is_sorted_and_numbered(tmp_path):
    path = tmp_path / "h.csv"
    path.write_text("submit_time,duration,num_gpus,tenant,gpu_type\n50,100,2,b,\n10,300,1,a,A100\n")
    trace = load_csv(path)
    assert [(j.job_id, j.submit_s, j.tenant, j.gpu_type) for j in trace.jobs] == [
        ("j000000", 0, "a", "A100"),
        ("j000001", 40, "b", "GPU"),
    ]
    assert trace.quota_nodes == {("a", "A100"): 2, ("b", "GPU"): 1}  # 7.5 GPUs of load / 5.6
    r = simulate(trace)
    assert not r.unfinished


def test_a_bad_csv_line_says_where(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("submit_time,duration,num_gpus,tenant,gpu_type\n1,x,1,a,\n")
    with pytest.raises(ValueError, match="line 2"):
        load_csv(path)
