"""`gpuyard sim`: parse the options, load the trace, compare the policies, print and write."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from rich.console import Console

from gpuyard.model import QueuePolicy
from gpuyard.scheduler import POLICIES, compiled
from gpuyard.scheduler.baselines import ALIASES, canonical_policy
from gpuyard.sim.engine import SimConfig
from gpuyard.sim.metrics import Summary
from gpuyard.sim.private import PRIVATE
from gpuyard.sim.report import compare, table, tenant_table, write_outputs
from gpuyard.sim.seeds import SeedRun, run_seeds
from gpuyard.sim.seedtable import seed_table, write_seed_rows
from gpuyard.sim.traces import Trace, load_csv, load_philly, one_tenant

DEFAULT_POLICIES = "fifo-private,fifo-quota,fifo-backfill,las,default,sjf-oracle,srtf-oracle"
SIM_POLICIES = (PRIVATE, *POLICIES)  # fifo-private is the simulator's: private clusters


def load_trace(spec: str, trace_dir: Path, quotas: str | None, merged: bool = False) -> Trace:
    """`philly` or `csv:FILE`; `merged`: every job in one tenant `all` (`--one-tenant`)."""
    if spec == "philly":
        quotas = quotas or "helios"
        trace = load_philly(trace_dir, quotas)
    elif spec.startswith("csv:"):
        quotas = quotas or "demand:0.7"
        trace = load_csv(Path(spec[4:]), quotas)
    else:
        raise ValueError(f"unknown trace {spec!r}: philly or csv:FILE")
    return one_tenant(trace, quotas) if merged else trace


def parse_policies(text: str) -> list[str]:
    """The policies by their names (`fifo`, the old name of `fifo-quota`, is accepted)."""
    policies = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in policies if p not in SIM_POLICIES and p not in ALIASES]
    if unknown:
        raise ValueError(f"unknown policies {unknown}; choose from {', '.join(SIM_POLICIES)}")
    return [canonical_policy(p) for p in policies]


def run_sim(
    trace_spec: str,
    trace_dir: Path,
    quotas: str | None,
    policies: str,
    out: Path | None,
    config: SimConfig,
    limit: int | None,
    console: Console,
    seeds: list[int] | None = None,
    jobs: int | None = None,
    merged: bool = False,
) -> None:
    """One seed (`config.seed`) as before; `seeds`: each (policy, seed) in its own process
    (`jobs` of them at once), mean ± std (docs/sim.md, Seeds)."""
    trace = load_trace(trace_spec, trace_dir, quotas, merged).limit(limit)
    names = parse_policies(policies)
    for note in trace.notes:
        console.print(f"[dim]{note}[/dim]")
    gpus = trace.total_nodes * trace.gpus_per_node
    console.print(
        f"{len(trace.jobs):,} jobs, {len(trace.tenants)} tenants, {trace.total_nodes} nodes "
        f"({gpus:,} GPUs); cycle {config.cycle_s:g} s, checkpoint {config.checkpoint_s:g} s, "
        f"grace {config.grace_s} s, jitter {config.jitter_s:g} s, "
        f"{f'seeds {seeds}' if seeds else f'seed {config.seed}'}; {scheduler_build()}"
    )
    title = f"{trace.name}, quotas {quotas or 'default'}: {len(trace.jobs):,} jobs, {gpus} GPUs"
    if seeds:
        _run_seeds(trace, names, config, seeds, jobs, out, title, console)
        return
    with console.status("simulating") as status:
        c = compare(trace, names, config, lambda p: status.update(f"simulating {p}"))
    console.print(table(c, title))
    if "default" in names:
        console.print(tenant_table(c, "default"))
    print_estimates(c.summaries, console)
    if out is not None:
        for path in write_outputs(out, c):
            console.print(f"wrote {path}")
        console.print(f"wrote {out}/summary.csv, tenants.csv, jobs_*.csv")


def _run_seeds(
    trace: Trace,
    names: list[str],
    config: SimConfig,
    seeds: list[int],
    jobs: int | None,
    out: Path | None,
    title: str,
    console: Console,
) -> None:
    with console.status(f"simulating {len(names)} policies × {len(seeds)} seeds") as status:
        runs = run_seeds(trace, names, config, seeds, jobs, lambda r: _said(r, status.update))
    console.print(seed_table(runs, title))
    print_estimates([r.summary for r in runs], console)
    if out is not None:
        console.print(f"wrote {write_seed_rows(out / 'seeds.csv', runs, {})}")


def _said(run: SeedRun, say: Callable[[str], object]) -> None:
    s = run.summary
    say(f"{run.policy} seed {run.seed}: avg JCT {s.avg_jct_s / 3600:,.2f} h ({s.replay_s:.0f} s)")


def print_estimates(summaries: Sequence[Summary], console: Console) -> None:
    """How good the run-time estimates were (traces with users; same for every policy up to
    the order jobs ended in): the first summary that had any."""
    s = next((s for s in summaries if s.estimated), None)
    if s is not None:
        console.print(
            f"run-time estimates ({s.policy}): {s.estimated:,} of {s.jobs:,} jobs had one; "
            f"|estimate − duration| / duration median {s.estimate_median_err:.2f}, "
            f"mean {s.estimate_mean_err:.2f}; {100 * s.estimate_within_2x:.0f} % within 2×"
        )


def sim_config(
    cycle_s: float,
    checkpoint_s: float,
    grace_s: int,
    seed: int,
    tenant_queue: str,
    tenant_backfill: bool = True,
    tenant_preemption: bool = True,
    least_served_first: bool = True,
    jitter_s: float = 0.0,
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
        jitter_s=jitter_s,
    )


def scheduler_build() -> str:
    """Which build of the scheduler replays: replay times depend on it (docs/sim.md)."""
    return "scheduler compiled (mypyc)" if compiled() else "scheduler pure Python"
