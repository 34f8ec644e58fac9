"""`gpuyard sim`: parse the options, load the trace, compare the policies, print and write."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from gpuyard.model import QueuePolicy
from gpuyard.scheduler import POLICIES, compiled
from gpuyard.sim.engine import SimConfig
from gpuyard.sim.report import compare, table, tenant_table, write_outputs
from gpuyard.sim.traces import Trace, load_csv, load_philly

DEFAULT_POLICIES = "fifo,fifo-backfill,las,default,sjf-oracle,srtf-oracle"


def load_trace(spec: str, trace_dir: Path, quotas: str | None) -> Trace:
    """`philly` or `csv:FILE`."""
    if spec == "philly":
        return load_philly(trace_dir, quotas or "helios")
    if spec.startswith("csv:"):
        return load_csv(Path(spec[4:]), quotas or "demand:0.7")
    raise ValueError(f"unknown trace {spec!r}: philly or csv:FILE")


def parse_policies(text: str) -> list[str]:
    policies = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        raise ValueError(f"unknown policies {unknown}; choose from {', '.join(POLICIES)}")
    return policies


def run_sim(
    trace_spec: str,
    trace_dir: Path,
    quotas: str | None,
    policies: str,
    out: Path | None,
    config: SimConfig,
    limit: int | None,
    console: Console,
) -> None:
    trace = load_trace(trace_spec, trace_dir, quotas).limit(limit)
    names = parse_policies(policies)
    for note in trace.notes:
        console.print(f"[dim]{note}[/dim]")
    gpus = trace.total_nodes * trace.gpus_per_node
    console.print(
        f"{len(trace.jobs):,} jobs, {len(trace.tenants)} tenants, {trace.total_nodes} nodes "
        f"({gpus:,} GPUs); cycle {config.cycle_s:g} s, checkpoint {config.checkpoint_s:g} s, "
        f"grace {config.grace_s} s, seed {config.seed}; {scheduler_build()}"
    )
    with console.status("simulating") as status:
        c = compare(trace, names, config, lambda p: status.update(f"simulating {p}"))
    title = f"{trace.name}, quotas {quotas or 'default'}: {len(trace.jobs):,} jobs, {gpus} GPUs"
    console.print(table(c, title))
    if "default" in names:
        console.print(tenant_table(c, "default"))
    if out is not None:
        for path in write_outputs(out, c):
            console.print(f"wrote {path}")
        console.print(f"wrote {out}/summary.csv, tenants.csv, jobs_*.csv")


def sim_config(
    cycle_s: float,
    checkpoint_s: float,
    grace_s: int,
    seed: int,
    tenant_queue: str,
    tenant_backfill: bool = True,
    tenant_preemption: bool = True,
    least_served_first: bool = True,
    aged_holds: bool = False,
) -> SimConfig:
    return SimConfig(
        cycle_s=cycle_s,
        checkpoint_s=checkpoint_s,
        grace_s=grace_s,
        seed=seed,
        tenant_queue=QueuePolicy(tenant_queue),
        tenant_backfill=tenant_backfill,
        tenant_preemption=tenant_preemption,
        least_served_first=least_served_first,
        aged_holds=aged_holds,
    )


def scheduler_build() -> str:
    """Which build of the scheduler replays: replay times depend on it (docs/sim.md)."""
    return "scheduler compiled (mypyc)" if compiled() else "scheduler pure Python"
