"""Metrics of a simulation, as the papers define them, and their CSV files.

- JCT = completion − submission (average, median, p95, p99); queueing delay = first start −
  submission; makespan = last completion − first submission;
- GPU allocation over time (allocated GPUs at each change; hourly means for plots);
- per tenant: average queueing delay in the shared cluster vs in a private cluster of its
  quota (HiveD's sharing anomaly: worse off when shared > private + `SLACK_S`), GPU share
  received (its GPU-seconds / cluster GPU-seconds over the makespan) vs guaranteed;
- preemptions and the GPU-hours they lost (run time since the last checkpoint);
- run-time estimates (traces with users): how many jobs had one when they arrived, and how
  far off it was: |estimate − duration| / duration (median, mean), share within 2×.
Jobs that never finished (none can start on the idle cluster) are counted apart.
"""

from __future__ import annotations

import csv
import math
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from gpuyard.sim.engine import SimResult

SLACK_S = 1.0
HOUR = 3600.0


@dataclass(frozen=True, slots=True)
class TenantRow:
    tenant: str
    jobs: int
    quota_gpus: int
    queue_shared_s: float
    queue_private_s: float | None
    share_received: float
    share_guaranteed: float

    @property
    def worse_off(self) -> bool:
        private = self.queue_private_s
        return private is not None and self.queue_shared_s > private + SLACK_S


@dataclass(frozen=True, slots=True)
class Summary:
    policy: str
    jobs: int
    finished: int
    avg_jct_s: float
    median_jct_s: float
    p95_jct_s: float
    p99_jct_s: float
    avg_queue_s: float
    makespan_s: float
    alloc_pct: float
    preemptions: int
    lost_gpu_h: float
    no_wait_jct_s: float
    replay_s: float
    cycles: int
    replay_cpu_s: float = 0.0
    quiet_cycles: int = 0
    estimated: int = 0  # jobs that had a run-time estimate when they arrived
    estimate_median_err: float = math.nan  # |estimate − duration| / duration
    estimate_mean_err: float = math.nan
    estimate_within_2x: float = math.nan  # share of estimates within 2× of the duration
    tenants: tuple[TenantRow, ...] = field(default=())

    @property
    def worse_off(self) -> list[TenantRow]:
        return [t for t in self.tenants if t.worse_off]


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an ascending sequence."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def summarize(result: SimResult, private: Mapping[str, float] | None = None) -> Summary:
    done = [j for j in result.jobs if j.end is not None]
    jct = sorted(j.end - j.trace.submit_s for j in done)
    first = min((j.trace.submit_s for j in result.jobs), default=0.0)
    makespan = max((j.end for j in done), default=first) - first
    return Summary(
        policy=result.config.policy,
        jobs=len(result.jobs),
        finished=len(done),
        avg_jct_s=mean(jct),
        median_jct_s=percentile(jct, 50),
        p95_jct_s=percentile(jct, 95),
        p99_jct_s=percentile(jct, 99),
        avg_queue_s=mean([j.first_start - j.trace.submit_s for j in done]),
        makespan_s=makespan,
        alloc_pct=100 * gpu_seconds(result.alloc) / max(1.0, result.capacity * makespan),
        preemptions=sum(j.preemptions for j in result.jobs),
        lost_gpu_h=sum(j.lost_gpu_s for j in result.jobs) / HOUR,
        no_wait_jct_s=mean([j.trace.duration_s for j in done]),
        replay_s=result.wall_s,
        cycles=result.cycles,
        replay_cpu_s=result.cpu_s,
        quiet_cycles=result.quiet_cycles,
        **asdict(estimate_quality(result)),
        tenants=tuple(tenant_rows(result, makespan, private or {})),
    )


@dataclass(frozen=True, slots=True)
class EstimateQuality:
    """`Summary`'s estimate fields (same names)."""

    estimated: int = 0
    estimate_median_err: float = math.nan
    estimate_mean_err: float = math.nan
    estimate_within_2x: float = math.nan


def estimate_quality(result: SimResult) -> EstimateQuality:
    """Over the jobs that had a run-time estimate when they arrived."""
    pairs = [(j.expected_s, j.trace.duration_s) for j in result.jobs if j.expected_s is not None]
    if not pairs:
        return EstimateQuality()
    errors = sorted(abs(e - d) / d for e, d in pairs)
    within = sum(1 for e, d in pairs if d / 2 <= e <= 2 * d)
    return EstimateQuality(len(pairs), statistics.median(errors), mean(errors), within / len(pairs))


def with_private(summary: Summary, private: Mapping[str, float]) -> Summary:
    """The summary with each tenant's private queueing delay from `private` (as if it had been
    summarized with it: a run in another process learns them after it ended)."""
    rows = tuple(replace(t, queue_private_s=private.get(t.tenant)) for t in summary.tenants)
    return replace(summary, tenants=rows)


def gpu_seconds(alloc: Sequence[tuple[float, int]]) -> float:
    return sum(g * (t1 - t0) for (t0, g), (t1, _) in zip(alloc, alloc[1:], strict=False))


def queueing_by_tenant(result: SimResult) -> dict[str, float]:
    waits: dict[str, list[float]] = defaultdict(list)
    for j in result.jobs:
        if j.first_start is not None:
            waits[j.trace.tenant].append(j.first_start - j.trace.submit_s)
    return {t: mean(w) for t, w in waits.items()}


def tenant_rows(
    result: SimResult, makespan: float, private: Mapping[str, float]
) -> list[TenantRow]:
    trace, shared = result.trace, queueing_by_tenant(result)
    counts: dict[str, int] = defaultdict(int)
    for j in result.jobs:
        counts[j.trace.tenant] += 1
    total = max(1.0, result.capacity * makespan)
    rows = []
    for tenant in trace.tenants:
        quota = sum(trace.quota_gpus(t, f) for t, f in trace.quota_nodes if t == tenant)
        rows.append(
            TenantRow(
                tenant,
                counts[tenant],
                quota,
                shared.get(tenant, math.nan),
                private.get(tenant),
                result.tenant_gpu_s.get(tenant, 0.0) / total,
                quota / max(1, result.capacity),
            )
        )
    return rows


def hourly_allocation(alloc: Sequence[tuple[float, int]], end: float) -> list[float]:
    """Mean GPUs allocated in each hour from 0 to `end`."""
    hours = [0.0] * (int(end // HOUR) + 1)
    points = [*alloc, (end, alloc[-1][1] if alloc else 0)]
    for (t0, g), (t1, _) in zip(points, points[1:], strict=False):
        t = t0
        while t < t1:
            h = int(t // HOUR)
            step = min(t1, (h + 1) * HOUR) - t
            if h < len(hours):
                hours[h] += g * step / HOUR
            t += step
    return hours


# ---- CSV -------------------------------------------------------------------------------

SUMMARY_FIELDS = [f for f in Summary.__dataclass_fields__ if f != "tenants"]


def write_csv(out: Path, summaries: Sequence[Summary], results: Sequence[SimResult]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "summary.csv", "w", newline="") as f:
        w = csv.DictWriter(f, SUMMARY_FIELDS + ["worse_off_tenants"])
        w.writeheader()
        for s in summaries:
            row = {k: v for k, v in asdict(s).items() if k != "tenants"}
            w.writerow({**row, "worse_off_tenants": len(s.worse_off)})
    with open(out / "tenants.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["policy", *TenantRow.__dataclass_fields__, "worse_off"])
        for s in summaries:
            for t in s.tenants:
                w.writerow([s.policy, *asdict(t).values(), t.worse_off])
    for r in results:
        _write_jobs(out / f"jobs_{r.config.policy}.csv", r)


def _write_jobs(path: Path, result: SimResult) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            [
                "job_id",
                "tenant",
                "gpus",
                "submit_s",
                "duration_s",
                "first_start_s",
                "end_s",
                "attempts",
                "preemptions",
                "lost_gpu_s",
            ]
        )
        for j in result.jobs:
            t = j.trace
            w.writerow(
                [
                    t.job_id,
                    t.tenant,
                    t.gpus,
                    t.submit_s,
                    t.duration_s,
                    j.first_start,
                    j.end,
                    j.attempt,
                    j.preemptions,
                    round(j.lost_gpu_s, 1),
                ]
            )
