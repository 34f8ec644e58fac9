"""The cluster page's small charts (issue 20): each GPU's utilisation and memory in use over the
last hour, as points of two SVG polylines placed by the server (no script), from the per-minute
history every node's readings fill (`controller.gpuhistory`). Pure functions."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from gpuyard.api.schemas.nodes import NodeOut
from gpuyard.controller.gpuhistory import GpuPoint

WIDTH = 120.0
HEIGHT = 28.0
PAD = 1.0  # so that 0 % and 100 % stay inside the box
WINDOW_S = 3600.0

LastHour = Callable[[str], list[tuple[float, GpuPoint]]]  # uuid → (age s, minute), oldest first


@dataclass(frozen=True, slots=True)
class GpuChart:
    width: float
    height: float
    util: str  # polyline points: utilisation %
    memory: str  # polyline points: memory in use %; "" where NVML gave none
    title: str  # the tooltip: what the lines say in words


def gpu_chart(points: list[tuple[float, GpuPoint]], window_s: float = WINDOW_S) -> GpuChart | None:
    """None without a reading (a fake GPU, or none yet)."""
    shown = [(age, p) for age, p in points if 0 <= age <= window_s]
    if not shown:
        return None
    util = _line(((age, p.util_pct) for age, p in shown), window_s)
    memory = _line(((age, p.memory_pct) for age, p in shown if p.memory_pct is not None), window_s)
    utils = [p.util_pct for _, p in shown]
    mems = [p.memory_pct for _, p in shown if p.memory_pct is not None]
    title = (
        f"last {len(shown)} min: utilisation mean {sum(utils) / len(utils):.0f}%, "
        f"max {max(utils):.0f}%, now {utils[-1]:.0f}%"
        + (f"; memory in use now {mems[-1]:.0f}%" if mems else "")
    )
    return GpuChart(WIDTH, HEIGHT, util, memory, title)


def gpu_charts(last_hour: LastHour | None, nodes: Iterable[NodeOut]) -> dict[str, GpuChart]:
    """GPU UUID → its chart, for the GPUs of `nodes` that have readings."""
    if last_hour is None:
        return {}
    charts = {g.uuid: gpu_chart(last_hour(g.uuid)) for n in nodes for g in n.gpus if not g.fake}
    return {uuid: c for uuid, c in charts.items() if c is not None}


def _line(values: Iterable[tuple[float, float]], window_s: float) -> str:
    """`x,y` pairs: x from the hour's start (left) to now (right), y from 100 % (top) to 0."""
    out = []
    for age, pct in values:
        x = WIDTH * (1 - age / window_s)
        y = PAD + (HEIGHT - 2 * PAD) * (1 - min(max(pct, 0.0), 100.0) / 100)
        out.append(f"{x:.1f},{y:.1f}")
    return " ".join(out)
