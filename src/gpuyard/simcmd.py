"""`gpuyard sim`: replay a GPU-cluster trace through the scheduler (see docs/sim.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from gpuyard.sim.command import DEFAULT_POLICIES, run_sim, sim_config
from gpuyard.sim.openbcmd import DEFAULT_OPENB_POLICIES, run_openb
from gpuyard.sim.seeds import parse_seeds
from gpuyard.sim.traces import default_trace_dir

DEFAULT_TRACE_DIR = default_trace_dir()

sim_app = typer.Typer(add_completion=False)


@sim_app.command()
def sim(
    trace: Annotated[
        str, typer.Option(help="philly, openb, or csv:FILE (see docs/traces.md)")
    ] = "philly",
    trace_dir: Annotated[
        Path, typer.Option(help="where the trace files are (env GPUYARD_TRACE_DIR)")
    ] = DEFAULT_TRACE_DIR,
    quotas: Annotated[
        str | None,
        typer.Option(help="helios (Philly only) or demand:F, e.g. demand:0.7"),
    ] = None,
    policy: Annotated[str, typer.Option(help="comma-separated policies")] = DEFAULT_POLICIES,
    out: Annotated[Path | None, typer.Option(help="write CSVs and PNG plots here")] = None,
    seed: Annotated[int, typer.Option(help="seed of the checkpoint phases (and of --jitter)")] = 0,
    limit: Annotated[int | None, typer.Option(help="replay only the first N jobs")] = None,
    cycle: Annotated[float, typer.Option(help="seconds between cycles while jobs wait")] = 60.0,
    checkpoint: Annotated[
        float, typer.Option(help="checkpoint interval in seconds (0: on SIGTERM)")
    ] = 1800.0,
    grace: Annotated[int, typer.Option(help="preemption grace period in seconds")] = 30,
    tenant_queue: Annotated[
        str, typer.Option(help="queue policy of the tenants under `default`: fifo or las")
    ] = "las",
    tenant_backfill: Annotated[
        bool,
        typer.Option(help="`default`: later jobs of a tenant may start behind its blocked head"),
    ] = True,
    tenant_preemption: Annotated[
        bool, typer.Option(help="`default`: demote (preempt) jobs with more GPU time (LAS)")
    ] = True,
    least_served_first: Annotated[
        bool,
        typer.Option(help="`default`: tenants' heads by LAS queue before fair share (Tiresias)"),
    ] = True,
    seeds: Annotated[
        str | None,
        typer.Option(
            help="seeds, e.g. 0-4 or 0,3,7: each (policy, seed) in parallel, mean ± std "
            "(replaces --seed); openb: how many seeds (42, 43, ...), 10 as the FGD paper"
        ),
    ] = None,
    jobs: Annotated[
        int | None, typer.Option(help="--seeds: processes at once (default: one per core)")
    ] = None,
    jitter: Annotated[
        float, typer.Option(help="move each arrival later by a seeded offset in [0, S) s")
    ] = 0.0,
    one_tenant: Annotated[
        bool, typer.Option(help="every job of the trace in one tenant `all`, quotas of the whole")
    ] = False,
    workers: Annotated[int, typer.Option(help="openb: processes running seeds")] = 1,
) -> None:
    """Replay a GPU-cluster trace through the scheduler under several policies, side by side."""
    console = Console()
    try:
        if trace == "openb":
            chosen = DEFAULT_OPENB_POLICIES if policy == DEFAULT_POLICIES else policy
            if seeds and not seeds.isdigit():
                raise ValueError(f"--trace openb: --seeds is how many seeds, not {seeds!r}")
            run_openb(trace_dir, chosen, int(seeds or 10), out, console, workers)
            return
        config = sim_config(
            cycle,
            checkpoint,
            grace,
            seed,
            tenant_queue,
            tenant_backfill=tenant_backfill,
            tenant_preemption=tenant_preemption,
            least_served_first=least_served_first,
            jitter_s=jitter,
        )
        chosen_seeds = parse_seeds(seeds) if seeds else None
        run_sim(
            trace,
            trace_dir,
            quotas,
            policy,
            out,
            config,
            limit,
            console,
            chosen_seeds,
            jobs,
            one_tenant,
        )
    except (ValueError, OSError) as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from e
