"""The usage report (`GET /api/v1/usage`, `gpuyard usage`, the portal's Usage page), drawn
from the usage roll-up (`store/rollup.py`), never from task rows: per tenant, user or job,
GPU-hours (shared GPUs by their share), CPU-hours, jobs, average and p95 wait to the first
start, GPU-hours lost to preemption, and for tenants their quota and budget; per day, for
charts, GPU-hours, waits and the average queue length.

The window is cut at whole UTC hours (the roll-up's grain): `since` rounded down, `until` up.
Who sees what: a platform admin every tenant; anyone with a role in a tenant (viewers too:
accounting is what they are for) that tenant's usage, every user's and job's in it.
"""

from __future__ import annotations

import enum
import math
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from gpuyard.api.errors import InvalidInput
from gpuyard.api.schemas.common import iso
from gpuyard.api.schemas.usage import DayPoint, UsageDaily, UsageOut, UsageRow, UsageSeries
from gpuyard.api.services.jobcontrol import parse_since
from gpuyard.controller import Controller
from gpuyard.controller.view import period_bounds
from gpuyard.model import Tenant
from gpuyard.store import JobWait, UsageHour
from gpuyard.store.rollup import HOUR, hour_of

DEFAULT_WINDOW_S = 30 * 86400.0
LATEST = 253_370_764_800.0  # 9999-01-01: a window's bounds stay printable dates
LOST_TO_PREEMPTION = (
    "the GPU-hours of every attempt that ended by preemption, counted in the hour it ended: "
    "the platform does not know a job's checkpoints, so this is the most that was lost"
)


class UsageBy(enum.StrEnum):
    tenant = "tenant"
    user = "user"
    job = "job"


Key = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Window:
    since: float  # on an hour
    until: float  # on an hour, > since

    @property
    def hours(self) -> float:
        return (self.until - self.since) / HOUR


@dataclass(slots=True)
class Tally:
    gpu_s: float = 0.0
    cpu_s: float = 0.0
    lost_s: float = 0.0
    name: str | None = None
    jobs: set[str] = field(default_factory=set)
    waits: list[float] = field(default_factory=list)


# -- the window ------------------------------------------------------------------------


def parse_window(since: str | None, until: str | None, now: float) -> Window:
    """`since`/`until`: `7d` (that long ago) or an ISO time; default the last 30 days."""
    start = _time(since, now, "query.since") if since else max(0.0, now - DEFAULT_WINDOW_S)
    end = _time(until, now, "query.until") if until else now
    if end <= start:
        raise InvalidInput("invalid request", [("query.until", "must be later than since")])
    return Window(hour_of(start), math.ceil(end / HOUR) * HOUR)


def _time(value: str, now: float, path: str) -> float:
    """A bound of the window: before 1970 is 1970 (nothing is older); after 9998 a 422."""
    t = parse_since(value, now, path)
    if t >= LATEST:
        raise InvalidInput("invalid request", [(path, "must be before 9999")])
    return max(0.0, t)


# -- grouping --------------------------------------------------------------------------


def group_key(by: UsageBy) -> Callable[[UsageHour | JobWait], Key]:
    if by is UsageBy.tenant:
        return lambda r: (r.tenant,)
    if by is UsageBy.user:
        return lambda r: (r.tenant, r.owner or "")
    return lambda r: (r.tenant, r.owner or "", r.job_id)


def tally(
    hours: Iterable[UsageHour], waits: Iterable[JobWait], key: Callable[[UsageHour | JobWait], Key]
) -> dict[Key, Tally]:
    out: dict[Key, Tally] = defaultdict(Tally)
    for h in hours:
        t = out[key(h)]
        t.gpu_s += h.gpu_seconds
        t.cpu_s += h.cpu_seconds
        t.lost_s += h.lost_gpu_seconds
        t.jobs.add(h.job_id)
        t.name = h.name
    for w in waits:
        t = out[key(w)]
        t.waits.append(w.wait_s)
        t.name = w.name
    return out


def p95(values: list[float]) -> float | None:
    """The nearest-rank 95th percentile (None for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def usage_row(key: Key, t: Tally) -> UsageRow:
    return UsageRow(
        tenant=key[0],
        user=(key[1] or None) if len(key) > 1 else None,
        job=key[2] if len(key) > 2 else None,
        name=t.name if len(key) > 2 else None,
        gpu_hours=t.gpu_s / HOUR,
        cpu_hours=t.cpu_s / HOUR,
        jobs=len(t.jobs),
        started=len(t.waits),
        avg_wait_s=sum(t.waits) / len(t.waits) if t.waits else None,
        p95_wait_s=p95(t.waits),
        lost_gpu_hours=t.lost_s / HOUR,
    )


def total_of(tallies: Iterable[Tally]) -> Tally:
    out = Tally()
    for t in tallies:
        out.gpu_s += t.gpu_s
        out.cpu_s += t.cpu_s
        out.lost_s += t.lost_s
        out.jobs |= t.jobs
        out.waits += t.waits
    return out


# -- quota and budget ------------------------------------------------------------------


def with_quota(row: UsageRow, tenant: Tenant | None, window: Window, used_s: float) -> UsageRow:
    """A tenant's row with its guarantee over the window and its budget this period."""
    if tenant is None:
        return row
    quota = sum(q.guaranteed for q in tenant.quotas) * window.hours
    return row.model_copy(
        update={
            "quota_gpu_hours": quota,
            "quota_used_pct": 100.0 * row.gpu_hours / quota if quota else None,
            "budget_gpu_hours": tenant.gpu_hour_budget,
            "budget_period": str(tenant.budget_period),
            "budget_used_gpu_hours": used_s / HOUR if tenant.gpu_hour_budget else None,
        }
    )


def budget_used_s(ctl: Controller, tenant: Tenant, now: float) -> float:
    """GPU-seconds the tenant used in its current budget period, from the roll-up."""
    start, _ = period_bounds(now, tenant.budget_period)
    hours = ctl.store.accounting.hours(hour_of(start), now + HOUR, [tenant.name])
    return sum(h.gpu_seconds for h in hours)


# -- the report ------------------------------------------------------------------------


def usage_report(
    ctl: Controller, tenants: Collection[str] | None, by: UsageBy, window: Window
) -> UsageOut:
    """The usage of `tenants` (None: all) in `window`, grouped `by`."""
    hours = ctl.store.accounting.hours(window.since, window.until, tenants)
    waits = ctl.store.accounting.waits(window.since, window.until, tenants)
    tallies = tally(hours, waits, group_key(by))
    rows = [usage_row(k, tallies[k]) for k in sorted(tallies)]
    if by is UsageBy.tenant:
        rows = _tenant_rows(ctl, rows, window)
    return UsageOut(
        by=str(by),
        since=iso(window.since) or "",
        until=iso(window.until) or "",
        rows=rows,
        total=usage_row(("",), total_of(tallies.values())).model_copy(update={"tenant": "*"}),
        rolled_up_to=iso(ctl.rolled_up_at),
        lost_to_preemption=LOST_TO_PREEMPTION,
    )


def _tenant_rows(ctl: Controller, rows: list[UsageRow], window: Window) -> list[UsageRow]:
    known = {t.name: t for t in ctl.store.tenants.tenants()}
    now = ctl.clock.now()
    return [
        with_quota(r, known.get(r.tenant), window, _used(ctl, known.get(r.tenant), now))
        for r in rows
    ]


def _used(ctl: Controller, tenant: Tenant | None, now: float) -> float:
    return budget_used_s(ctl, tenant, now) if tenant and tenant.gpu_hour_budget else 0.0


# -- per day, for the portal's charts --------------------------------------------------


def day_of(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d")


def usage_daily(ctl: Controller, tenants: Collection[str] | None, window: Window) -> UsageDaily:
    """GPU-hours per tenant per day, and the average wait of the jobs first started each day."""
    gpu: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for h in ctl.store.accounting.hours(window.since, window.until, tenants):
        gpu[h.tenant][day_of(h.hour)] += h.gpu_seconds / HOUR
    waits: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for w in ctl.store.accounting.waits(window.since, window.until, tenants):
        waits[w.tenant][day_of(w.first_start)].append(w.wait_s)
    return UsageDaily(
        since=iso(window.since) or "",
        until=iso(window.until) or "",
        gpu_hours=[_series(t, days) for t, days in sorted(gpu.items())],
        avg_wait_s=[
            _series(t, {d: sum(v) / len(v) for d, v in days.items()})
            for t, days in sorted(waits.items())
        ],
        avg_queue_length=queue_series(ctl, tenants, window),
    )


def queue_series(
    ctl: Controller, tenants: Collection[str] | None, window: Window
) -> list[UsageSeries]:
    """Each tenant's queued jobs averaged over each day: its queued job-seconds that day over
    the day's seconds in the window."""
    queued: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for hour, tenant, seconds in ctl.store.accounting.queued(window.since, window.until, tenants):
        queued[tenant][day_of(hour)] += seconds
    return [
        _series(t, {d: s / _day_seconds(d, window) for d, s in days.items()})
        for t, days in sorted(queued.items())
    ]


def _day_seconds(day: str, window: Window) -> float:
    start = datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=UTC).timestamp()
    return max(HOUR, min(start + 86400, window.until) - max(start, window.since))


def _series(tenant: str, days: dict[str, float]) -> UsageSeries:
    return UsageSeries(
        tenant=tenant, points=[DayPoint(day=d, value=v) for d, v in sorted(days.items())]
    )
