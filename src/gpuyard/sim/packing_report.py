"""Report of the openb packing experiment: the published FGD curves, a table beside them,
a CSV of the curves and a PNG plot of allocation rate against arrived workload."""

from __future__ import annotations

import csv
import gzip
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from rich.table import Table

from gpuyard.sim.packing import MAX_ARRIVED_PCT, PackingRun

FGD_REFERENCE = "fgd_atc23_expected_alloc_rate.csv.gz"
REFERENCE_WORKLOAD = "openb_pod_list_default"
# our policy name → the artifact's (sc_policy without its "NN-" prefix)
PAPER_NAME = {
    "random": "Random",
    "bestfit": "BestFit",
    "fgd": "FGD",
    "fgd-exact": "FGD",
    "fgd-gpu": "FGD",
    "fgd-balance": "FGD",
}


@dataclass(frozen=True, slots=True)
class PolicyCurve:
    policy: str
    seeds: tuple[int, ...]
    mean: np.ndarray  # [131] allocation rate (%) at 0..130 % arrived, mean over seeds
    failed: float  # pods that fit nowhere, mean over seeds
    seconds: float  # mean run time of one seed


def summarize(runs: Sequence[PackingRun]) -> list[PolicyCurve]:
    """One curve per policy, in the order the policies first appear."""
    out = []
    for policy in dict.fromkeys(r.policy for r in runs):
        mine = [r for r in runs if r.policy == policy]
        curves = np.vstack([r.curve() for r in mine])
        out.append(
            PolicyCurve(
                policy,
                tuple(r.seed for r in mine),
                np.nanmean(curves, axis=0),
                float(np.mean([r.failed for r in mine])),
                float(np.mean([r.seconds for r in mine])),
            )
        )
    return out


def load_reference(path: Path, workload: str = REFERENCE_WORKLOAD) -> dict[str, np.ndarray]:
    """The artifact's published curves for `workload`: policy → mean over its seeds."""
    rows: dict[str, list[np.ndarray]] = {}
    with gzip.open(path, "rt", newline="") as f:
        for row in csv.DictReader(f):
            if row["workload"] != workload:
                continue
            name = row["sc_policy"].split("-", 1)[-1]
            values = [row.get(str(k)) or "nan" for k in range(MAX_ARRIVED_PCT + 1)]
            rows.setdefault(name, []).append(np.array(values, dtype=float))
    if not rows:
        raise ValueError(f"{path}: no rows for workload {workload!r}")
    return {name: np.nanmean(np.vstack(v), axis=0) for name, v in rows.items()}


def table(curves: Sequence[PolicyCurve], reference: dict[str, np.ndarray]) -> Table:
    t = Table(title="GPU allocation rate (%) on openb vs the FGD paper (ATC'23)")
    for col in ("policy", "seeds", "@100 %", "paper", "Δ", "@130 %", "paper", "Δ"):
        t.add_column(col, justify="left" if col == "policy" else "right")
    t.add_column("failed pods", justify="right")
    t.add_column("s/seed", justify="right")
    for c in curves:
        paper = reference.get(PAPER_NAME.get(c.policy, ""))
        cells = [c.policy, str(len(c.seeds))]
        for k in (100, MAX_ARRIVED_PCT):
            ref = paper[k] if paper is not None else np.nan
            cells += [f"{c.mean[k]:.2f}", _num(ref), _num(c.mean[k] - ref, signed=True)]
        t.add_row(*cells, f"{c.failed:,.0f}", f"{c.seconds:.1f}")
    return t


def _num(x: float, signed: bool = False) -> str:
    if np.isnan(x):
        return "—"
    return f"{x:+.2f}" if signed else f"{x:.2f}"


def write_csv(path: Path, curves: Sequence[PolicyCurve], reference: dict[str, np.ndarray]) -> Path:
    """One row per curve: ours (mean over seeds) and the paper's, 0..130 % arrived."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["source", "policy", "seeds", *range(MAX_ARRIVED_PCT + 1)])
        for c in curves:
            w.writerow(["gpuyard", c.policy, len(c.seeds), *(_cell(v) for v in c.mean)])
        for name, values in reference.items():
            w.writerow(["fgd-atc23", name, 10, *(_cell(v) for v in values)])
    return path


def _cell(v: float) -> str:
    return "" if np.isnan(v) else f"{v:.3f}"


def plot(path: Path, curves: Sequence[PolicyCurve], reference: dict[str, np.ndarray]) -> Path:
    """Allocation rate vs arrived workload: ours solid, the paper's dashed."""
    fig = Figure(figsize=(7.5, 4.8))
    ax = fig.add_subplot()
    x = np.arange(MAX_ARRIVED_PCT + 1)
    colors = {}
    for i, c in enumerate(curves):
        (line,) = ax.plot(x, c.mean, lw=1.6, label=f"{c.policy} (gpuyard)", color=f"C{i}")
        colors[PAPER_NAME.get(c.policy, c.policy)] = line.get_color()
    for name, values in reference.items():
        if name in colors:
            ax.plot(x, values, ls="--", lw=1.1, color=colors[name], label=f"{name} (paper)")
    ax.plot(x, x, color="0.7", lw=0.8, ls=":", label="everything placed")
    ax.set(xlabel="arrived workload (% of cluster GPU capacity)",
           ylabel="GPU allocation rate (%)", xlim=(0, MAX_ARRIVED_PCT), ylim=(0, 100))
    inset = ax.inset_axes((0.55, 0.1, 0.4, 0.4))
    for line in ax.get_lines()[:-1]:
        inset.plot(x, line.get_ydata(), ls=line.get_linestyle(), color=line.get_color(), lw=1)
    inset.set(xlim=(90, MAX_ARRIVED_PCT), ylim=(84, 97))
    inset.tick_params(labelsize=7)
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(alpha=0.3)
    path.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    return path
