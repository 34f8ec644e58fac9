"""Run several policies on one trace and put them side by side: summaries, the private
cluster baseline per tenant (`fifo-private`), one rich table (average JCT first, the gains
over `fifo-private` and `fifo-quota`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from rich.table import Table

from gpuyard.scheduler.baselines import canonical_policy
from gpuyard.sim.engine import SimConfig, SimResult, simulate, with_jitter
from gpuyard.sim.metrics import HOUR, Summary, queueing_by_tenant, summarize, write_csv
from gpuyard.sim.plots import write_plots
from gpuyard.sim.private import PRIVATE, private_result
from gpuyard.sim.traces import Trace

REFERENCES = (PRIVATE, "fifo-quota")  # the gain rows: "<reference> ÷ this"


@dataclass(frozen=True, slots=True)
class Comparison:
    trace: Trace
    summaries: list[Summary]
    results: list[SimResult]
    private: dict[str, float]
    references: dict[str, Summary]  # fifo-private always (its runs are the private column)


def compare(
    trace: Trace,
    policies: Sequence[str],
    base: SimConfig,
    progress: Callable[[str], None] = lambda _: None,
) -> Comparison:
    trace = with_jitter(trace, base)  # once, so that the private runs see the same arrivals
    progress("private clusters (fifo-private: FIFO, one cluster per tenant)")
    alone = private_result(trace, base)
    private = queueing_by_tenant(alone)
    references = {PRIVATE: summarize(alone, private)}
    results, summaries = [], []
    for policy in map(canonical_policy, policies):
        progress(policy)
        result = alone if policy == PRIVATE else simulate(trace, replace(base, policy=policy))
        results.append(result)
        summaries.append(summarize(result, private))
        s = summaries[-1]
        references.setdefault(policy, s)
        progress(
            f"  {policy}: avg JCT {_h(s.avg_jct_s)} h, {s.preemptions:,} preemptions, "
            f"{s.cycles:,} cycles ({s.quiet_cycles:,} skipped), replay {s.replay_s:.1f} s "
            f"wall / {s.replay_cpu_s:.1f} s CPU"
        )
    return Comparison(trace, summaries, results, private, references)


def write_outputs(out: Path, c: Comparison) -> list[Path]:
    write_csv(out, c.summaries, c.results)
    return write_plots(out, c.summaries, c.results)


def _h(s: float) -> str:
    return "–" if math.isnan(s) else f"{s / HOUR:,.2f}"


def _ratio(base: float, x: float) -> str:
    return "–" if not base or math.isnan(base) or not x else f"{base / x:,.2f}×"


def _worst(s: Summary) -> str:
    pairs = [
        (t.queue_shared_s / max(t.queue_private_s, 1.0), t.tenant)
        for t in s.tenants
        if t.queue_private_s is not None
    ]
    if not pairs:
        return "–"
    ratio, tenant = max(pairs)
    return f"{ratio:,.2f} ({tenant})"


ROWS: list[tuple[str, Callable[[Summary], str]]] = [
    ("avg JCT (h)", lambda s: _h(s.avg_jct_s)),
    ("median JCT (h)", lambda s: _h(s.median_jct_s)),
    ("p95 JCT (h)", lambda s: _h(s.p95_jct_s)),
    ("p99 JCT (h)", lambda s: _h(s.p99_jct_s)),
    ("avg queueing (h)", lambda s: _h(s.avg_queue_s)),
    ("makespan (days)", lambda s: f"{s.makespan_s / 86400:,.2f}"),
    ("GPU allocation (%)", lambda s: f"{s.alloc_pct:.1f}"),
    ("preemptions", lambda s: f"{s.preemptions:,}"),
    ("GPU-h lost to preemption", lambda s: f"{s.lost_gpu_h:,.1f}"),
    ("tenants worse off than private", lambda s: f"{len(s.worse_off)}/{len(s.tenants)}"),
    ("worst tenant: shared/private queueing", _worst),
    ("jobs finished", lambda s: f"{s.finished:,}/{s.jobs:,}"),
    ("avg JCT / no-wait bound", lambda s: f"{s.avg_jct_s / s.no_wait_jct_s:.4f}"),
    ("replay (s)", lambda s: f"{s.replay_s:.1f}"),
    ("replay CPU (s)", lambda s: f"{s.replay_cpu_s:.1f}"),
    ("cycles run (skipped)", lambda s: f"{s.cycles:,} ({s.quiet_cycles:,})"),
]


def table(c: Comparison, title: str) -> Table:
    t = Table(title=title)
    t.add_column("metric")
    for s in c.summaries:
        t.add_column(s.policy, justify="right")
    for name, cell in ROWS:
        t.add_row(name, *(cell(s) for s in c.summaries))
        attr = GAIN_ROWS.get(name, "")
        for ref in (c.references[r] for r in REFERENCES if attr and r in c.references):
            t.add_row(
                f"  {ref.policy} ÷ this",
                *(_ratio(getattr(ref, attr), getattr(s, attr)) for s in c.summaries),
            )
    return t


GAIN_ROWS = {
    "avg JCT (h)": "avg_jct_s",
    "p99 JCT (h)": "p99_jct_s",
    "avg queueing (h)": "avg_queue_s",
}


def tenant_table(c: Comparison, policy: str) -> Table:
    s = next(s for s in c.summaries if s.policy == policy)
    t = Table(title=f"per tenant — {policy}")
    for col in (
        "tenant",
        "jobs",
        "quota GPUs",
        "queue shared (h)",
        "queue private (h)",
        "GPU share got",
        "guaranteed",
    ):
        t.add_column(col, justify="right")
    for r in s.tenants:
        t.add_row(
            r.tenant + (" ✗" if r.worse_off else ""),
            f"{r.jobs:,}",
            str(r.quota_gpus),
            _h(r.queue_shared_s),
            _h(r.queue_private_s) if r.queue_private_s is not None else "–",
            f"{100 * r.share_received:.1f}%",
            f"{100 * r.share_guaranteed:.1f}%",
        )
    return t
