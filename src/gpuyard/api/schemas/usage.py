"""The usage report's bodies (`GET /api/v1/usage`): per tenant, user or job, GPU- and
CPU-hours, jobs, waits and GPU-hours lost to preemption, against quota and budget."""

from __future__ import annotations

from gpuyard.api.schemas.common import Out


class UsageRow(Out):
    """One group's usage in the window. `tenant` always; `user` for by=user and by=job;
    `job` and `name` for by=job. Quota and budget only for by=tenant."""

    tenant: str
    user: str | None = None
    job: str | None = None
    name: str | None = None
    gpu_hours: float
    cpu_hours: float
    jobs: int  # jobs that used anything in the window
    started: int  # jobs whose first start is in the window (the waits' count)
    avg_wait_s: float | None
    p95_wait_s: float | None
    lost_gpu_hours: float  # GPU-hours of attempts ended by preemption
    quota_gpu_hours: float | None = None  # guaranteed GPUs x the window's hours
    quota_used_pct: float | None = None
    budget_gpu_hours: float | None = None  # the tenant's gpuHourBudget per period
    budget_period: str | None = None
    budget_used_gpu_hours: float | None = None  # in the current budget period


class UsageOut(Out):
    by: str
    since: str  # the window, cut at whole UTC hours: [since, until)
    until: str
    rows: list[UsageRow]
    total: UsageRow
    rolled_up_to: str | None  # usage is rolled up every minute; later use is not in yet
    lost_to_preemption: str  # what lostGpuHours counts


class DayPoint(Out):
    day: str  # YYYY-MM-DD, UTC
    value: float


class UsageSeries(Out):
    """A chart's data: one series per tenant."""

    tenant: str
    points: list[DayPoint]


class UsageDaily(Out):
    since: str
    until: str
    gpu_hours: list[UsageSeries]  # GPU-hours per tenant per day
    avg_wait_s: list[UsageSeries]  # average wait of the jobs first started that day
    avg_queue_length: list[UsageSeries]  # queued jobs, averaged over the day (in the window)
