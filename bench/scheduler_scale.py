"""Scheduler scale: placements per second filling an empty cluster, and a steady-state cycle.

    .venv/bin/python bench/scheduler_scale.py [--nodes 2000] [--jobs 10000] [--tenants 50]

Cluster: NODES × 8 fake A100 GPUs; TENANTS tenants whose guaranteed quotas sum to the
cluster; JOBS pending jobs of 1–64 GPUs (more than 8 GPUs: gangs of 8-GPU tasks).
- fill: `Scheduler.cycle` until the empty cluster is full; placements (jobs) per second;
- steady: the cluster full, JOBS pending, 1 % of the running jobs finishing between cycles
  (and as many new jobs queued); the median and p95 cycle time;
- baseline: v1 `schedule()` (a full scan of every queued job and every node per cycle) on a
  tenth of the size, in the same run; ratios against it.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from gpuyard.model import (
    FlavorQuota,
    GpuDevice,
    JobDemand,
    Node,
    Resources,
    RunningJob,
    TaskDemand,
    Tenant,
)
from gpuyard.scheduler import ClusterView, CycleResult, Scheduler, schedule

FLAVOR = "A100-80GB"
SIZES = (1, 2, 4, 8, 16, 32, 64)
WEIGHTS = (30, 20, 20, 15, 8, 5, 2)


def make_nodes(n: int) -> tuple[Node, ...]:
    return tuple(
        Node(
            f"node{i:05d}",
            128_000,
            1_024_000,
            tuple(GpuDevice(g, f"GPU-{i}-{g}", FLAVOR, 81920, fake=True) for g in range(8)),
        )
        for i in range(n)
    )


def make_tenants(n: int, gpus: int) -> dict[str, Tenant]:
    share = gpus // n
    return {
        f"t{i:02d}": Tenant(f"t{i:02d}", quotas=(FlavorQuota(FLAVOR, share),)) for i in range(n)
    }


class Jobs:
    def __init__(self, tenants: list[str], seed: int = 7) -> None:
        self.rng = random.Random(seed)
        self.tenants = tenants
        self.seq = 0

    def make(self, now: float) -> JobDemand:
        self.seq += 1
        gpus = self.rng.choices(SIZES, WEIGHTS)[0]
        per_task = min(gpus, 8)
        res = Resources.of(4 * per_task, 32_000 * per_task, per_task)
        tasks = tuple(TaskDemand("worker", i, res) for i in range(gpus // per_task))
        tenant = self.rng.choice(self.tenants)
        return JobDemand(
            f"job{self.seq}",
            tenant,
            self.rng.choice((0, 0, 0, 1)),
            self.seq,
            tasks,
            owner=f"user{self.rng.randrange(20)}",
            submitted_at=now,
            max_runtime_s=self.rng.choice((None, 3600, 7200)),
        )


def running_from(result: CycleResult, jobs: dict[str, JobDemand], now: float) -> list[RunningJob]:
    out = []
    for placement, admission in zip(result.admit, result.admissions, strict=True):
        job = jobs[placement.job_id]
        out.append(
            RunningJob(
                job.job_id,
                job.tenant,
                placement.tasks,
                now,
                job.priority,
                job.owner,
                admission.borrowed,
                job.max_runtime_s,
            )
        )
    return out


def fill(scheduler: Scheduler, nodes, tenants, queued: dict[str, JobDemand]):
    running: dict[str, RunningJob] = {}
    spent, placed, now = 0.0, 0, 0.0
    while True:
        view = ClusterView(nodes, tenants, tuple(running.values()), tuple(queued.values()), {}, now)
        t0 = time.perf_counter()
        result = scheduler.cycle(view)
        spent += time.perf_counter() - t0
        if not result.admit:
            return running, placed, spent
        for r in running_from(result, queued, now):
            running[r.job_id] = r
            del queued[r.job_id]
        placed += len(result.admit)
        now += 1


def steady(scheduler, nodes, tenants, running, queued, jobs: Jobs, cycles: int, now=10.0):
    rng = random.Random(11)
    times = []
    for _ in range(cycles):
        for job_id in rng.sample(sorted(running), max(1, len(running) // 100)):
            del running[job_id]
        while len(queued) < TARGET_PENDING:
            job = jobs.make(now)
            queued[job.job_id] = job
        view = ClusterView(nodes, tenants, tuple(running.values()), tuple(queued.values()), {}, now)
        t0 = time.perf_counter()
        result = scheduler.cycle(view)
        times.append(time.perf_counter() - t0)
        for r in running_from(result, queued, now):
            running[r.job_id] = r
            del queued[r.job_id]
        now += 1
    return times


def baseline(nodes_n: int, jobs_n: int, cycles: int) -> tuple[float, float]:
    """v1 `schedule()`: placements/s filling, median steady cycle (s)."""
    nodes = make_nodes(nodes_n)
    gen = Jobs(["t00"], seed=3)
    queued = {j.job_id: j for j in (gen.make(0) for _ in range(jobs_n))}
    held: dict[str, tuple] = {}
    t0 = time.perf_counter()
    placed = 0
    while True:
        result = schedule(nodes, [t for ts in held.values() for t in ts], list(queued.values()))
        if not result.admit:
            break
        for p in result.admit:
            held[p.job_id] = p.tasks
            del queued[p.job_id]
        placed += len(result.admit)
    fill_rate = placed / (time.perf_counter() - t0)
    rng, times = random.Random(5), []
    for _ in range(cycles):
        for job_id in rng.sample(sorted(held), max(1, len(held) // 100)):
            del held[job_id]
        t0 = time.perf_counter()
        result = schedule(nodes, [t for ts in held.values() for t in ts], list(queued.values()))
        times.append(time.perf_counter() - t0)
        for p in result.admit:
            held[p.job_id] = p.tasks
            del queued[p.job_id]
    return fill_rate, statistics.median(times)


TARGET_PENDING = 10_000


def main() -> None:
    global TARGET_PENDING
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--tenants", type=int, default=50)
    ap.add_argument("--cycles", type=int, default=30)
    args = ap.parse_args()
    TARGET_PENDING = args.jobs
    nodes = make_nodes(args.nodes)
    tenants = make_tenants(args.tenants, 8 * args.nodes)
    jobs = Jobs(sorted(tenants))
    queued = {j.job_id: j for j in (jobs.make(0.0) for _ in range(args.jobs))}
    scheduler = Scheduler()
    running, placed, spent = fill(scheduler, nodes, tenants, queued)
    used = sum(r.gpus for r in running.values())
    rate = placed / spent
    print(
        f"fill: {placed} jobs placed ({used}/{8 * args.nodes} GPUs) in {spent:.3f} s "
        f"= {rate:,.0f} placements/s"
    )
    times = steady(scheduler, nodes, tenants, running, queued, jobs, args.cycles)
    med, p95 = statistics.median(times), sorted(times)[int(0.95 * (len(times) - 1))]
    print(
        f"steady: {len(queued)} pending, {len(running)} running, cycle median "
        f"{med * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms (first {times[0] * 1000:.1f} ms)"
    )
    b_nodes, b_jobs = args.nodes // 10, args.jobs // 10
    b_rate, b_cycle = baseline(b_nodes, b_jobs, 5)
    print(
        f"baseline v1 schedule() at {b_nodes} nodes / {b_jobs} jobs: {b_rate:,.0f} "
        f"placements/s, steady cycle {b_cycle * 1000:.1f} ms"
    )
    print(
        f"ratios: fill {rate / b_rate:.1f}x the baseline's rate at 10x the size; "
        f"steady cycle {b_cycle / med:.1f}x faster at 10x the size"
    )


if __name__ == "__main__":
    main()
