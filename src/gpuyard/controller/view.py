"""What the scheduler sees each cycle: the `ClusterView` built from the live jobs (mirror.py)
and the store.

Queued jobs become `JobDemand`s (kept between cycles for each attempt and priority: the
scheduler's caches key on them; held jobs never get here, `loop.py` leaves them out), jobs
holding resources become `RunningJob`s, and tenants with a GPU-hour budget get their usage
in the current period. Both kinds of job carry how many times they were preempted (the
store's count) and their expected run time (`runtimes.py`: learned from their user's
succeeded jobs, capped by maxRuntime).

A bound job without gang allocation (`gang: false`) whose tasks are not all placed yet is
also queued demand: its remainder (`JobDemand.remainder`), the tasks of its attempt without
a task row, with the job's id. It is shown until a stop is asked or sent (a cancel, a
preemption, its completion policy decided): then the unplaced tasks are never placed.
"""

from __future__ import annotations

from calendar import monthrange
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from gpuyard.controller.mirror import JobMirror
from gpuyard.controller.runtimes import LearnedRuntimes
from gpuyard.model import (
    BudgetPeriod,
    JobDemand,
    JobState,
    Node,
    Resources,
    RunningJob,
    TaskPlacement,
    Tenant,
    TenantUsage,
)
from gpuyard.scheduler import ClusterView
from gpuyard.spec import JobSpec, job_demand
from gpuyard.store import JobRecord, Store, TaskRecord


def period_bounds(now: float, period: BudgetPeriod) -> tuple[float, float]:
    """The UTC day, ISO week (from Monday) or calendar month that `now` falls in."""
    t = datetime.fromtimestamp(now, UTC)
    day = t.replace(hour=0, minute=0, second=0, microsecond=0)
    if period is BudgetPeriod.DAY:
        start, end = day, day + timedelta(days=1)
    elif period is BudgetPeriod.WEEK:
        start = day - timedelta(days=day.weekday())
        end = start + timedelta(days=7)
    else:
        start = day.replace(day=1)
        end = start + timedelta(days=monthrange(start.year, start.month)[1])
    return start.timestamp(), end.timestamp()


def _demand_key(job: JobRecord) -> tuple[str, int, int]:
    """A demand is kept per attempt and priority: a new priority makes a new demand."""
    return job.id, job.attempt, job.priority


def task_placement(t: TaskRecord) -> TaskPlacement:
    used = Resources(t.cpu_milli, t.memory_mb, 0 if t.gpu_memory_mb else len(t.gpus))
    return TaskPlacement(t.role, t.index, t.node, t.gpus, used, t.gpu_memory_mb)


class ViewBuilder:
    def __init__(
        self,
        store: Store,
        jobs: JobMirror,
        spec_of: Callable[[JobRecord], JobSpec],
        runtimes: LearnedRuntimes,
    ) -> None:
        self._store = store
        self._jobs = jobs  # the live jobs (mirror.py)
        self._spec_of = spec_of
        self._runtimes = runtimes
        self._demands: dict[tuple[str, int, int], JobDemand] = {}
        self._rests: dict[tuple[str, int, int, int], JobDemand] = {}  # by tasks placed

    def partly_placed(self) -> list[JobRecord]:
        """Bound jobs without gang allocation that may still place tasks (no stop asked)."""
        bound = self._jobs.in_states(JobState.SCHEDULED, JobState.RUNNING)
        return [j for j in bound if j.stop_requested is None and not self._spec_of(j).gang]

    def build(
        self,
        nodes: Sequence[Node],
        tenants_read: Iterable[Tenant],
        active_tasks: Iterable[TaskRecord],
        queued: Sequence[JobRecord],
        now: float,
        partly_placed: Sequence[JobRecord] = (),
    ) -> ClusterView:
        """The view of the nodes, tenants and active tasks the cycle read (and compared, to
        know whether it may be skipped: quiet.py), with the live jobs."""
        tenants = {t.name: t for t in tenants_read}
        return ClusterView(
            nodes=nodes,
            tenants=tenants,
            running=self._running(active_tasks),
            queued=self._queued(queued, now) + self._remainders(partly_placed, now),
            usage=self._usage(tenants.values(), now),
            now=now,
        )

    def _queued(self, queued: Sequence[JobRecord], now: float) -> list[JobDemand]:
        keys = {_demand_key(j) for j in queued}
        self._demands = {k: d for k, d in self._demands.items() if k in keys}
        fresh = [j for j in queued if _demand_key(j) not in self._demands]
        attained = self._store.usage.attained_by_job((j.id for j in fresh), now)
        for job in fresh:
            self._demands[_demand_key(job)] = self._demand(job, attained.get(job.id, 0.0))
        return [self._demands[_demand_key(j)] for j in queued]

    def _demand(self, job: JobRecord, attained_gpu_s: float) -> JobDemand:
        spec = self._spec_of(job)
        return replace(
            job_demand(spec, job.id, job.seq),
            tenant=job.tenant,
            priority=job.priority,  # `gpuyard priority` changes it after submission
            owner=job.owner,
            submitted_at=job.queued_at or job.submitted_at,
            attained_gpu_s=attained_gpu_s,
            max_runtime_s=spec.max_runtime_s,
            expected_runtime_s=self._runtimes.expected_s(job, spec.max_runtime_s),
            preemptions=job.preemptions,
        )

    def _remainders(self, jobs: Sequence[JobRecord], now: float) -> list[JobDemand]:
        """The tasks not placed yet of bound jobs without gang allocation, one demand each."""
        out, keep = [], {}
        for job in jobs:
            tasks = self._store.jobs.tasks(job.id, attempt=job.attempt)
            if any(t.stop_sent for t in tasks):  # the attempt is decided (or being stopped)
                continue
            placed = {(t.role, t.index) for t in tasks}
            if len(placed) >= self._spec_of(job).task_count:
                continue
            key = (job.id, job.attempt, job.priority, len(placed))
            known = self._rests.get(key)
            if known is None:
                attained = self._store.usage.attained_by_job([job.id], now).get(job.id, 0.0)
                full = self._demand(job, attained)
                rest = tuple(t for t in full.tasks if (t.role, t.index) not in placed)
                known = replace(full.with_tasks(rest), remainder=True)
            keep[key] = known
            out.append(known)
        self._rests = keep
        return out

    def _running(self, active_tasks: Iterable[TaskRecord]) -> list[RunningJob]:
        by_job: dict[str, list[TaskRecord]] = defaultdict(list)
        for t in active_tasks:
            by_job[t.job_id].append(t)
        bound = self._jobs.in_states(JobState.SCHEDULED, JobState.RUNNING)
        return [self._running_job(j, by_job[j.id]) for j in bound if by_job.get(j.id)]

    def _running_job(self, job: JobRecord, tasks: list[TaskRecord]) -> RunningJob:
        starts = [t.started_at for t in tasks if t.started_at]
        spec = self._spec_of(job)
        max_runtime_s = spec.max_runtime_s
        return RunningJob(
            job_id=job.id,
            tenant=job.tenant,
            placements=tuple(task_placement(t) for t in tasks),
            started_at=min(starts) if starts else (job.queued_at or job.submitted_at),
            priority=job.priority,
            owner=job.owner,
            borrowed=job.borrowed,
            max_runtime_s=max_runtime_s,
            terminating=job.stop_requested is not None or any(t.stop_sent for t in tasks),
            expected_runtime_s=self._runtimes.expected_s(job, max_runtime_s),
            preemptions=job.preemptions,
            priority_class=spec.priority_class,
        )

    def _usage(self, tenants: Iterable[Tenant], now: float) -> dict[str, TenantUsage]:
        return tenant_usage(self._store, tenants, now)


def tenant_usage(store: Store, tenants: Iterable[Tenant], now: float) -> dict[str, TenantUsage]:
    """GPU-hours used in the current budget period by each tenant that has a budget."""
    out: dict[str, TenantUsage] = {}
    used_by_period: dict[BudgetPeriod, dict[str, float]] = {}
    for tenant in tenants:
        if tenant.gpu_hour_budget is None:
            continue
        start, end = period_bounds(now, tenant.budget_period)
        if tenant.budget_period not in used_by_period:
            used_by_period[tenant.budget_period] = store.usage.by_tenant(start, now)
        used_s = used_by_period[tenant.budget_period].get(tenant.name, 0.0)
        out[tenant.name] = TenantUsage(gpu_hours=used_s / 3600, period_ends_at=end)
    return out
