"""GPU-sharing packing on Alibaba openb (issue 5 item 5): the FGD paper's experiment,
every policy on 10 seeds, beside the paper's published curves.

    .venv/bin/python bench/openb_packing.py [--seeds 10] [--workers 2]
        [--policies bestfit,random,fgd,fgd-balance] [--out docs/img] [--runs DIR]

Prints the table (allocation rate at 100 % and 130 % arrived, the paper's, the difference),
the machine and the wall time; writes DIR/openb_alloc.csv and DIR/openb_alloc.png.
With --runs, every (policy, seed) run is kept there and reused by a later call (delete the
folder after changing a policy).
Results: docs/benchmarks.md, "GPU sharing: packing on Alibaba openb".
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

from rich.console import Console

from gpuyard.sim.openbcmd import run_openb
from gpuyard.sim.traces import default_trace_dir


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--policies", default="bestfit,random,fgd,fgd-balance")
    ap.add_argument("--out", type=Path, default=Path("docs/img"))
    ap.add_argument("--runs", type=Path, default=None, help="keep and reuse runs here")
    ap.add_argument("--trace-dir", type=Path, default=default_trace_dir())
    args = ap.parse_args()
    console = Console(width=120)
    console.print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, {args.workers} worker processes"
    )
    start = time.perf_counter()
    run_openb(
        args.trace_dir, args.policies, args.seeds, args.out, console, args.workers, args.runs
    )
    console.print(f"wall time: {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
