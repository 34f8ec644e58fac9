"""Runs of several seeds as one table: each metric's mean ± sample standard deviation over
the seeds, policies side by side, and per-seed ratios between policies (the gain rows, and
the ratios issue 16's targets are stated in)."""

from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.table import Table

from gpuyard.sim.metrics import HOUR, SUMMARY_FIELDS, Summary
from gpuyard.sim.private import PRIVATE
from gpuyard.sim.seeds import SeedRun

Metric = Callable[[Summary], float]


@dataclass(frozen=True, slots=True)
class Spread:
    """Mean and sample standard deviation (0 for one value) of `n` values."""

    mean: float
    std: float
    n: int

    def show(self, digits: int = 2) -> str:
        if math.isnan(self.mean):
            return "–"
        return f"{self.mean:,.{digits}f} ± {self.std:,.{digits}f}"


def spread(values: Sequence[float]) -> Spread:
    if not values:
        return Spread(math.nan, math.nan, 0)
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return Spread(statistics.fmean(values), std, len(values))


def by_policy(runs: Sequence[SeedRun]) -> dict[str, list[SeedRun]]:
    out: dict[str, list[SeedRun]] = {}
    for r in runs:
        out.setdefault(r.policy, []).append(r)
    return out


def ratio(runs: Sequence[SeedRun], num: str, den: str, metric: Metric) -> Spread:
    """metric(num) / metric(den), seed by seed, over the seeds both ran."""
    a = {r.seed: metric(r.summary) for r in runs if r.policy == num}
    b = {r.seed: metric(r.summary) for r in runs if r.policy == den}
    return spread([a[s] / b[s] for s in a if s in b and b[s]])


def worse_off(runs: Sequence[SeedRun]) -> str:
    """The most tenants worse off than private in any seed, and in how many seeds any are."""
    counts = [len(r.summary.worse_off) for r in runs]
    tenants = len(runs[0].summary.tenants) if runs else 0
    hit = sum(1 for c in counts if c)
    if hit == 0:
        return f"0/{tenants} in every seed"
    where = "in every seed" if hit == len(counts) else f"in {hit} of {len(counts)} seeds"
    return f"max {max(counts)}/{tenants}, {where}"


ROWS: list[tuple[str, Metric, int]] = [
    ("avg JCT (h)", lambda s: s.avg_jct_s / HOUR, 2),
    ("median JCT (h)", lambda s: s.median_jct_s / HOUR, 2),
    ("p95 JCT (h)", lambda s: s.p95_jct_s / HOUR, 2),
    ("p99 JCT (h)", lambda s: s.p99_jct_s / HOUR, 2),
    ("avg queueing (h)", lambda s: s.avg_queue_s / HOUR, 2),
    ("preemptions", lambda s: float(s.preemptions), 0),
    ("GPU-h lost to preemption", lambda s: s.lost_gpu_h, 1),
    ("avg JCT / no-wait bound", lambda s: s.avg_jct_s / s.no_wait_jct_s, 4),
    ("replay (s)", lambda s: s.replay_s, 1),
]
GAINS = ("avg JCT (h)", "p99 JCT (h)", "avg queueing (h)")
REFERENCES = (PRIVATE, "fifo-quota")


def seed_table(runs: Sequence[SeedRun], title: str) -> Table:
    """Mean ± std of each metric per policy; "<reference> ÷ this" rows under the JCT and
    queueing rows (per-seed ratios); tenants worse off as the worst seed and how often."""
    groups = by_policy(runs)
    seeds = sorted({r.seed for r in runs})
    t = Table(title=f"{title} — mean ± std over seeds {', '.join(map(str, seeds))}")
    t.add_column("metric")
    for policy in groups:
        t.add_column(policy, justify="right")
    for name, metric, digits in ROWS:
        t.add_row(
            name, *(spread([metric(r.summary) for r in g]).show(digits) for g in groups.values())
        )
        for ref in (r for r in REFERENCES if name in GAINS and r in groups):
            cells = (ratio(runs, ref, p, metric).show() for p in groups)
            t.add_row(f"  {ref} ÷ this", *cells)
    t.add_row("tenants worse off than private", *(worse_off(g) for g in groups.values()))
    return t


def write_seed_rows(path: Path, runs: Sequence[SeedRun], extra: dict[str, str]) -> Path:
    """One CSV row per (policy, seed): `extra`'s columns first, then policy, seed, the other
    fields of the summary and the number of tenants worse off (appended to a file that has
    its header already)."""
    rest = [f for f in SUMMARY_FIELDS if f != "policy"]
    fields = [*extra, "policy", "seed", *rest, "worse_off_tenants"]
    new = not path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fields)
        if new:
            w.writeheader()
        for r in runs:
            row = {k: v for k, v in asdict(r.summary).items() if k != "tenants"}
            w.writerow(
                {**extra, "seed": r.seed, **row, "worse_off_tenants": len(r.summary.worse_off)}
            )
    return path
