"""`gpuyard sim --trace openb`: the FGD packing experiment, printed beside the paper's numbers."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from gpuyard.sim.openb import OPENB_NODES, OPENB_PODS, load_openb_nodes, load_openb_pods
from gpuyard.sim.packing import INFLATE_TO, compare
from gpuyard.sim.packing_report import FGD_REFERENCE, load_reference, plot, summarize, table
from gpuyard.sim.packing_report import write_csv as write_curves

DEFAULT_OPENB_POLICIES = "bestfit,fgd,fgd-balance,random"
FIRST_SEED = 42  # the artifact's seeds are 42..51


def run_openb(
    trace_dir: Path,
    policies: str,
    seeds: int,
    out: Path | None,
    console: Console,
    workers: int = 1,
    runs_dir: Path | None = None,
) -> None:
    names = [p.strip() for p in policies.split(",") if p.strip()]
    if seeds < 1:
        raise ValueError(f"--seeds {seeds}: at least 1")
    pods = load_openb_pods(trace_dir / OPENB_PODS)
    cluster = load_openb_nodes(trace_dir / OPENB_NODES)
    reference = load_reference(trace_dir / FGD_REFERENCE)
    seed_list = list(range(FIRST_SEED, FIRST_SEED + seeds))
    console.print(
        f"openb: {len(pods):,} pods, {len(cluster.nodes):,} nodes ({cluster.total_gpus:,} GPUs); "
        f"inflated to {INFLATE_TO:.0%} of GPU capacity; seeds {seed_list[0]}..{seed_list[-1]}"
    )
    with console.status(f"packing {len(names)} policies × {seeds} seeds"):
        runs = compare(cluster, pods, names, seed_list, workers, runs_dir)
    curves = summarize(runs)
    console.print(table(curves, reference))
    if out is not None:
        console.print(f"wrote {write_curves(out / 'openb_alloc.csv', curves, reference)}")
        console.print(f"wrote {plot(out / 'openb_alloc.png', curves, reference)}")
