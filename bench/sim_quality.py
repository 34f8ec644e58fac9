"""Scheduling quality on Philly 2017: configurations A (Helios VC sizes) and B (quotas
proportional to demand, each VC ~70 % loaded), every policy side by side.

    .venv/bin/python bench/sim_quality.py [--limit N] [--out DIR] [--configs A,B]

Prints one table per configuration (and the per-tenant table of `default`), writes the CSVs
and plots under DIR/A and DIR/B (default docs/img/sim). Results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import platform
from pathlib import Path

from rich.console import Console

from gpuyard.sim.command import DEFAULT_POLICIES, parse_policies, scheduler_build
from gpuyard.sim.engine import SimConfig
from gpuyard.sim.report import compare, table, tenant_table, write_outputs
from gpuyard.sim.traces import default_trace_dir, load_philly

CONFIGS = {"A": "helios", "B": "demand:0.7"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--out", type=Path, default=Path("docs/img/sim"))
    ap.add_argument("--configs", default="A,B")
    ap.add_argument("--policy", default=DEFAULT_POLICIES)
    ap.add_argument("--trace-dir", type=Path, default=default_trace_dir())
    args = ap.parse_args()
    console = Console(width=160)
    console.print(
        f"machine: {platform.machine()}, {platform.python_version()}, {scheduler_build()}"
    )
    for name in args.configs.split(","):
        trace = load_philly(args.trace_dir, CONFIGS[name]).limit(args.limit)
        c = compare(trace, parse_policies(args.policy), SimConfig(), console.print)
        gpus = trace.total_nodes * trace.gpus_per_node
        console.print(table(c, f"{name}: Philly, quotas {CONFIGS[name]}, {gpus} GPUs"))
        if "default" in args.policy:
            console.print(tenant_table(c, "default"))
        write_outputs(args.out / name, c)


if __name__ == "__main__":
    main()
