"""The Usage page's charts as geometry for inline SVG, drawn by the server (no script): GPU-
hours per tenant per day as stacked bars, and the average wait per tenant per day as lines.
Pure functions of the API's `UsageDaily` body; the template only draws what they place."""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuyard.api.schemas.usage import UsageSeries

WIDTH = 720.0
HEIGHT = 220.0
LEFT = 48.0  # room for the value axis' labels
BOTTOM = 24.0  # room for the days
TOP = 8.0


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    tenant: str
    title: str  # the tooltip: tenant, day, value


@dataclass(frozen=True, slots=True)
class Line:
    tenant: str
    points: str  # SVG polyline points
    dots: tuple[tuple[float, float, str], ...]  # x, y, title


@dataclass(frozen=True, slots=True)
class Tick:
    y: float
    label: str


@dataclass(frozen=True, slots=True)
class Chart:
    width: float
    height: float
    bars: tuple[Bar, ...]
    lines: tuple[Line, ...]
    ticks: tuple[Tick, ...]
    days: tuple[tuple[float, str], ...]  # x, label (a few, not every day)
    tenants: tuple[str, ...]
    empty: bool


def number(value: float) -> str:
    """`1800`, `12`, `0.042`: whole from 10 up, two significant digits below."""
    return f"{value:.0f}" if value >= 10 else f"{value:.2g}"


def days_of(series: list[UsageSeries]) -> list[str]:
    return sorted({p.day for s in series for p in s.points})


def nice_top(value: float) -> float:
    """The axis' top: 1, 2 or 5 times a power of ten, at or above `value`."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= value)


def _y(value: float, top: float) -> float:
    return HEIGHT - BOTTOM - (value / top) * (HEIGHT - BOTTOM - TOP)


def _ticks(top: float, unit: str) -> tuple[Tick, ...]:
    return tuple(Tick(_y(top * i / 4, top), f"{top * i / 4:g}{unit}") for i in range(5))


def _day_labels(days: list[str], slot: float) -> tuple[tuple[float, str], ...]:
    step = max(1, math.ceil(len(days) / 8))
    return tuple((LEFT + slot * (i + 0.5), d[5:]) for i, d in enumerate(days) if i % step == 0)


def stacked_bars(series: list[UsageSeries], unit: str = "") -> Chart:
    """One bar a day, a segment a tenant (by name), the axis from 0 to a round top."""
    days = days_of(series)
    value = {(s.tenant, p.day): p.value for s in series for p in s.points}
    totals = [sum(value.get((s.tenant, d), 0.0) for s in series) for d in days]
    top = nice_top(max(totals, default=0.0))
    slot = (WIDTH - LEFT) / max(1, len(days))
    bars = []
    for i, day in enumerate(days):
        base = 0.0
        for s in series:
            v = value.get((s.tenant, day), 0.0)
            if v > 0:
                y0, y1 = _y(base, top), _y(base + v, top)
                bars.append(Bar(LEFT + slot * i + slot * 0.15, y1, slot * 0.7, y0 - y1, s.tenant,
                                f"{s.tenant} {day}: {v:.1f}{unit}"))  # fmt: skip
            base += v
    return _chart(series, days, slot, top, unit, bars=tuple(bars))


def lines(series: list[UsageSeries], unit: str = "") -> Chart:
    """A line a tenant through its days (a day without a value is skipped)."""
    days = days_of(series)
    top = nice_top(max((p.value for s in series for p in s.points), default=0.0))
    slot = (WIDTH - LEFT) / max(1, len(days))
    x_of = {d: LEFT + slot * (i + 0.5) for i, d in enumerate(days)}
    drawn = []
    for s in series:
        dots = tuple(
            (x_of[p.day], _y(p.value, top), f"{s.tenant} {p.day}: {number(p.value)}{unit}")
            for p in s.points
        )
        drawn.append(Line(s.tenant, " ".join(f"{x:.1f},{y:.1f}" for x, y, _ in dots), dots))
    return _chart(series, days, slot, top, unit, lines_=tuple(drawn))


def _chart(
    series: list[UsageSeries],
    days: list[str],
    slot: float,
    top: float,
    unit: str,
    bars: tuple[Bar, ...] = (),
    lines_: tuple[Line, ...] = (),
) -> Chart:
    return Chart(
        WIDTH, HEIGHT, bars, lines_, _ticks(top, unit), _day_labels(days, slot),
        tuple(s.tenant for s in series), not days,
    )  # fmt: skip
