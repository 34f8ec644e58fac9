"""PNG plots of a comparison (matplotlib, no global pyplot state): JCT CDF per policy, GPU
allocation over time, and per-tenant queueing delay shared vs in a private cluster."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from gpuyard.sim.engine import SimResult
from gpuyard.sim.metrics import HOUR, Summary, hourly_allocation

DPI = 110


def write_plots(
    out: Path, summaries: Sequence[Summary], results: Sequence[SimResult]
) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    return [
        _save(jct_cdf(results), out / "jct_cdf.png"),
        _save(allocation(results), out / "gpu_allocation.png"),
        _save(tenant_queueing(summaries), out / "tenant_queueing.png"),
    ]


def _save(fig: Figure, path: Path) -> Path:
    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    return path


def jct_cdf(results: Sequence[SimResult]) -> Figure:
    fig = Figure(figsize=(7, 4.5))
    ax = fig.add_subplot()
    for r in results:
        jct = sorted(j.end - j.trace.submit_s for j in r.jobs if j.end is not None)
        n = len(jct)
        ax.plot([max(1.0, x) for x in jct], [(i + 1) / n for i in range(n)], label=r.config.policy)
    ax.set_xscale("log")
    ax.set_xlabel("JCT (s, log)")
    ax.set_ylabel("fraction of jobs")
    ax.set_title(f"JCT CDF — {results[0].trace.name}" if results else "JCT CDF")
    ax.grid(True, alpha=0.3)
    ax.legend()
    return fig


def allocation(results: Sequence[SimResult]) -> Figure:
    fig = Figure(figsize=(9, 4.5))
    ax = fig.add_subplot()
    for r in results:
        end = max((j.end for j in r.jobs if j.end is not None), default=0.0)
        hours = hourly_allocation(r.alloc, end)
        days = [h / 24 for h in range(len(hours))]
        ax.plot(days, [100 * g / max(1, r.capacity) for g in hours], label=r.config.policy, lw=0.7)
    ax.set_xlabel("day")
    ax.set_ylabel("GPUs allocated (% of cluster, hourly mean)")
    ax.grid(True, alpha=0.3)
    ax.legend()
    return fig


def tenant_queueing(summaries: Sequence[Summary]) -> Figure:
    fig = Figure(figsize=(10, 4.5))
    ax = fig.add_subplot()
    if not summaries:
        return fig
    tenants = [t.tenant for t in summaries[0].tenants]
    width = 0.8 / (len(summaries) + 1)
    private = [(t.queue_private_s or 0.0) / HOUR for t in summaries[0].tenants]
    ax.bar([i for i in range(len(tenants))], private, width, label="private (FIFO)", color="k")
    for k, s in enumerate(summaries, start=1):
        ax.bar(
            [i + k * width for i in range(len(tenants))],
            [t.queue_shared_s / HOUR for t in s.tenants],
            width,
            label=s.policy,
        )
    ax.set_xticks([i + 0.4 for i in range(len(tenants))], tenants, rotation=45)
    ax.set_yscale("symlog", linthresh=0.01)
    ax.set_ylabel("average queueing delay (h)")
    ax.set_title("per tenant: shared cluster vs a private cluster of its quota")
    ax.legend(fontsize=7)
    return fig
