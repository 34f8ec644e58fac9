"""Scheduling quality on Philly 2017, issue 16's matrix: configurations A (Helios VC sizes),
B (quotas proportional to demand, each VC ~70 % loaded) and C (every VC merged into one
tenant at demand:0.95), each with 30-minute checkpoints and with lossless preemption, every
policy on seeds 0-4 with arrivals jittered by up to one cycle (60 s).

    PYTHONPATH=build/compiled .venv/bin/python bench/sim_quality.py [--configs A,B,C]
        [--modes checkpoint,lossless] [--seeds 0-4] [--jitter 60] [--jobs N]
        [--policy fifo-private,...] [--limit N] [--csv PATH]

Prints per configuration and mode the mean ± std table (sim/seedtable.py), the ratios the
targets are stated in and a verdict line per target (met when the mean over the seeds is
within it); writes one CSV row per (config, checkpoint, policy, seed). docs/sim.md, Seeds.
"""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from gpuyard.sim.command import load_trace, parse_policies, scheduler_build
from gpuyard.sim.engine import SimConfig
from gpuyard.sim.metrics import Summary
from gpuyard.sim.seeds import SeedRun, parse_seeds, run_seeds
from gpuyard.sim.seedtable import Spread, ratio, seed_table, spread, worse_off, write_seed_rows
from gpuyard.sim.traces import Trace, default_trace_dir

# config → (quotas, every job in one tenant)
CONFIGS = {"A": ("helios", False), "B": ("demand:0.7", False), "C": ("demand:0.95", True)}
# mode → (checkpoint interval s, grace s)
MODES = {"checkpoint": (1800.0, 30), "lossless": (0.0, 0)}
POLICIES = "fifo-private,fifo-quota,fifo-backfill,las,sjf-oracle,srtf-oracle,default"
B_LOST_GPU_H = 3996.0  # GPU-hours lost by `default` on B with checkpoints before issue 16
SPEED_S = 60.0  # per policy and seed, compiled build


@dataclass(frozen=True, slots=True)
class Verdict:
    target: str
    value: str
    met: bool | None  # None: not measured (a policy of it was not run)

    def line(self) -> str:
        word = {True: "met", False: "NOT met", None: "not measured"}[self.met]
        return f"  {self.target}: {self.value} → {word}"


def avg(s: Summary) -> float:
    return s.avg_jct_s


def p99(s: Summary) -> float:
    return s.p99_jct_s


def bound(s: Summary) -> float:
    return s.avg_jct_s / s.no_wait_jct_s


def of(runs: list[SeedRun], policy: str) -> list[SeedRun]:
    return [r for r in runs if r.policy == policy]


def within(target: str, value: Spread, limit: float) -> Verdict:
    met = None if value.n == 0 else value.mean <= limit
    return Verdict(f"{target} ≤ {limit:g}", value.show(3), met)


def ratios(runs: list[SeedRun]) -> list[tuple[str, Spread]]:
    """The ratios the targets are stated in, per seed, mean ± std."""
    return [
        ("default ÷ srtf-oracle (avg JCT)", ratio(runs, "default", "srtf-oracle", avg)),
        ("default ÷ las (avg JCT)", ratio(runs, "default", "las", avg)),
        ("default p99 ÷ fifo-backfill p99", ratio(runs, "default", "fifo-backfill", p99)),
        ("default ÷ fifo-private (avg JCT)", ratio(runs, "default", "fifo-private", avg)),
        (
            "default avg JCT ÷ no-wait bound",
            spread([bound(r.summary) for r in of(runs, "default")]),
        ),
    ]


def verdicts(config: str, mode: str, runs: list[SeedRun]) -> list[Verdict]:
    """Issue 16's targets that apply to this configuration and mode."""
    out: list[Verdict] = []
    mine = of(runs, "default")
    if config == "A":
        out.append(
            within(
                "A: default avg JCT ÷ no-wait bound", spread([bound(r.summary) for r in mine]), 1.01
            )
        )
    if config == "B":
        limit = 1.10 if mode == "lossless" else 1.15
        out.append(
            within(
                f"B {mode}: default ÷ srtf-oracle",
                ratio(runs, "default", "srtf-oracle", avg),
                limit,
            )
        )
        if mode == "checkpoint":
            lost = spread([r.summary.lost_gpu_h for r in mine])
            out.append(within("B checkpoint: default GPU-h lost", lost, B_LOST_GPU_H))
        worst = max((len(r.summary.worse_off) for r in mine), default=None)
        met = None if worst is None else worst == 0
        out.append(
            Verdict(
                f"B {mode}: no tenant worse off, every seed", worse_off(mine) if mine else "–", met
            )
        )
    if config == "C":
        out.append(within(f"C {mode}: default ÷ las", ratio(runs, "default", "las", avg), 1.10))
        out.append(
            within(
                f"C {mode}: default p99 ÷ fifo-backfill p99",
                ratio(runs, "default", "fifo-backfill", p99),
                1.0,
            )
        )
    slowest = max((r.summary.replay_s for r in runs), default=None)
    met = None if slowest is None else slowest <= SPEED_S
    out.append(
        Verdict(f"speed: every replay ≤ {SPEED_S:g} s", f"slowest {slowest or 0:.1f} s", met)
    )
    return out


def done(config: str, mode: str, run: SeedRun) -> str:
    s = run.summary
    return (
        f"  {config} {mode} {run.policy} seed {run.seed}: avg JCT {s.avg_jct_s / 3600:,.2f} h, "
        f"replay {s.replay_s:.0f} s ({s.replay_cpu_s:.0f} s CPU)"
    )


def run_one(
    args: argparse.Namespace, trace: Trace, config: str, mode: str, say: Callable
) -> list[SeedRun]:
    quotas, merged = CONFIGS[config]
    checkpoint, grace = MODES[mode]
    base = SimConfig(checkpoint_s=checkpoint, grace_s=grace, jitter_s=args.jitter)
    began = time.perf_counter()
    policies, seeds = parse_policies(args.policy), parse_seeds(args.seeds)
    runs = run_seeds(trace, policies, base, seeds, args.jobs, lambda r: say(done(config, mode, r)))
    wall = time.perf_counter() - began
    gpus = trace.total_nodes * trace.gpus_per_node
    title = (
        f"{config} {mode}: Philly, quotas {quotas}{' one tenant' if merged else ''}, {gpus} GPUs"
    )
    say(seed_table(runs, title))
    say(f"{config} {mode}: {len(runs)} replays in {wall:.0f} s wall")
    for name, value in ratios(runs):
        say(f"  {name}: {value.show(3)}")
    for v in verdicts(config, mode, runs):
        say(v.line())
    return runs


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--configs", default="A,B,C")
    ap.add_argument("--modes", default="checkpoint,lossless")
    ap.add_argument("--seeds", default="0-4")
    ap.add_argument("--jitter", type=float, default=60.0)
    ap.add_argument("--jobs", type=int, default=None, help="processes (default: one per core)")
    ap.add_argument("--policy", default=POLICIES)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--csv", type=Path, default=Path("sim_quality.csv"))
    ap.add_argument("--trace-dir", type=Path, default=default_trace_dir())
    args = ap.parse_args()
    console = Console(width=200)
    console.print(
        f"machine: {platform.machine()}, {platform.python_version()}, {scheduler_build()}"
    )
    args.csv.unlink(missing_ok=True)
    for config in args.configs.split(","):
        quotas, merged = CONFIGS[config]
        trace = load_trace("philly", args.trace_dir, quotas, merged).limit(args.limit)
        for mode in args.modes.split(","):
            runs = run_one(args, trace, config, mode, console.print)
            checkpoint = f"{MODES[mode][0]:g}"
            write_seed_rows(args.csv, runs, {"config": config, "checkpoint": checkpoint})
    console.print(f"wrote {args.csv}")


if __name__ == "__main__":
    main()
