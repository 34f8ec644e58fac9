"""The usage roll-up: what each job used in each UTC hour (GPU-, CPU- and preempted
GPU-seconds) and each job's wait to its first start, rolled up from the task rows.

The controller calls `roll_up` every so often: `load` reads (one short session), `plan` is
pure, `apply` writes (one transaction). A task carries how far it has been accounted
(`usage_to`) and whether its end has been (`usage_done`), so each second is counted once and
a task whose node reported an end earlier than a running roll-up had counted is corrected
(a negative slice). Once a task's row says `usage_done` it may be compacted away; the
roll-up rows (`usage_hours`, `usage_jobs`) are never compacted (docs/accounting.md).

GPU-seconds are counted as the store counts them elsewhere (`usage.gpus_held`): whole GPUs
one each, a shared task the part of its GPU's memory it holds. GPU-seconds lost to
preemption: the whole attempt of a task that ended `Preempted` (the platform does not know
a job's checkpoints, so this is the most that was lost), counted in the hour it ended.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from gpuyard.model import JobState, TaskReason
from gpuyard.store.tables import JobRow, TaskRow, UsageHourRow, UsageJobRow, UsageQueueRow
from gpuyard.store.usage import GpuMemory, gpu_memory, gpus_held

HOUR = 3600.0
BATCH = 20_000  # task rows a pass accounts at the most (a store's history: over a few passes)


@dataclass(frozen=True, slots=True)
class TaskSpan:
    """What the roll-up needs of one task row."""

    task_id: int
    job_id: str
    tenant: str
    owner: str | None
    name: str
    started_at: float | None
    finished_at: float | None
    reason: str | None
    gpus: float  # GPUs held: shared ones by their share
    cpus: float  # cores
    usage_to: float | None


@dataclass(frozen=True, slots=True)
class JobStart:
    job_id: str
    tenant: str
    owner: str | None
    name: str
    submitted_at: float
    started_at: float


@dataclass(slots=True)
class HourUse:
    tenant: str
    owner: str | None
    name: str
    gpu_s: float = 0.0
    cpu_s: float = 0.0
    lost_s: float = 0.0


@dataclass(slots=True)
class Plan:
    hours: dict[tuple[float, str], HourUse] = field(default_factory=dict)
    marks: list[dict[str, object]] = field(default_factory=list)  # task id, usage_to, done
    starts: list[JobStart] = field(default_factory=list)
    queued_s: dict[tuple[float, str], float] = field(default_factory=dict)  # hour, tenant


def hour_of(t: float) -> float:
    return math.floor(t / HOUR) * HOUR


def hour_slices(start: float, end: float) -> Iterator[tuple[float, float]]:
    """(hour, seconds) of [start, end) cut at each hour's start."""
    t = start
    while t < end:
        hour = hour_of(t)
        stop = min(end, hour + HOUR)
        yield hour, stop - t
        t = stop


# -- load ------------------------------------------------------------------------------


def load(sessions: sessionmaker[Session]) -> tuple[list[TaskSpan], list[JobStart], dict[str, int]]:
    """The tasks not yet accounted to their end, the started jobs without a wait row, and
    how many jobs each tenant has queued now."""
    tasks = (
        select(TaskRow, JobRow.tenant, JobRow.owner, JobRow.name)
        .join(JobRow, JobRow.id == TaskRow.job_id)
        .where(TaskRow.usage_done.is_(False))
        .where(TaskRow.started_at.is_not(None) | TaskRow.finished_at.is_not(None))
        .order_by(TaskRow.id)
        .limit(BATCH)
    )
    waits = select(UsageJobRow.job_id)
    starts = (
        select(JobRow).where(JobRow.started_at.is_not(None), JobRow.id.not_in(waits)).limit(BATCH)
    )
    queued = (
        select(JobRow.tenant, func.count())
        .where(JobRow.state == str(JobState.QUEUED))
        .group_by(JobRow.tenant)
    )
    with sessions() as s:
        memory = gpu_memory(s)
        spans = [_span(row, t, o, n, memory) for row, t, o, n in s.execute(tasks)]
        started = [_start(j) for j in s.scalars(starts)]
        counts = {tenant: int(n) for tenant, n in s.execute(queued)}
    return spans, started, counts


def _span(row: TaskRow, tenant: str, owner: str | None, name: str, memory: GpuMemory) -> TaskSpan:
    return TaskSpan(
        row.id, row.job_id, tenant, owner, name, row.started_at, row.finished_at, row.reason,
        gpus_held(row, memory), row.cpu_milli / 1000, row.usage_to,
    )  # fmt: skip


def _start(j: JobRow) -> JobStart:
    assert j.started_at is not None
    return JobStart(j.id, j.tenant, j.owner, j.name, j.submitted_at, j.started_at)


# -- plan (pure) -----------------------------------------------------------------------


def plan(
    spans: list[TaskSpan],
    starts: list[JobStart],
    now: float,
    queued: dict[str, int] | None = None,
    elapsed_s: float = 0.0,
) -> Plan:
    """What to add to which hour, and how far each task is then accounted; each tenant's
    queue now, held for the `elapsed_s` since the last pass, as queued job-seconds."""
    out = Plan(starts=starts)
    for span in spans:
        _plan_task(out, span, now)
    for tenant, n in (queued or {}).items():
        if n and elapsed_s > 0:
            out.queued_s[(hour_of(now), tenant)] = n * elapsed_s
    return out


def _plan_task(out: Plan, t: TaskSpan, now: float) -> None:
    done = t.finished_at is not None
    if t.started_at is None:  # ended before it started: nothing used
        out.marks.append({"id": t.task_id, "usage_to": None, "usage_done": done})
        return
    to = max(t.started_at, t.finished_at if t.finished_at is not None else now)
    was = t.usage_to if t.usage_to is not None else t.started_at
    sign, lo, hi = (1.0, was, to) if to >= was else (-1.0, to, was)
    for hour, seconds in hour_slices(lo, hi):
        use = _hour(out, hour, t)
        use.gpu_s += sign * seconds * t.gpus
        use.cpu_s += sign * seconds * t.cpus
    if done and t.reason == TaskReason.PREEMPTED:
        _hour(out, hour_of(to), t).lost_s += (to - t.started_at) * t.gpus
    out.marks.append({"id": t.task_id, "usage_to": to, "usage_done": done})


def _hour(out: Plan, hour: float, t: TaskSpan) -> HourUse:
    key = (hour, t.job_id)
    if key not in out.hours:
        out.hours[key] = HourUse(t.tenant, t.owner, t.name)
    return out.hours[key]


# -- apply -----------------------------------------------------------------------------


def apply(sessions: sessionmaker[Session], p: Plan) -> None:
    """Add the plan's hours, mark its tasks and write its waits, in one transaction."""
    with sessions.begin() as s:
        _add_hours(s, p.hours)
        _add_queue(s, p.queued_s)
        if p.marks:
            s.execute(update(TaskRow), p.marks)
        for j in p.starts:
            s.merge(_wait_row(j))


def _add_hours(s: Session, hours: dict[tuple[float, str], HourUse]) -> None:
    if not hours:
        return
    jobs = {job for _, job in hours}
    q = select(UsageHourRow).where(
        UsageHourRow.job_id.in_(jobs), UsageHourRow.hour.in_({h for h, _ in hours})
    )
    existing = {(r.hour, r.job_id): r for r in s.scalars(q)}
    for (hour, job_id), use in hours.items():
        row = existing.get((hour, job_id))
        if row is None:
            row = UsageHourRow(hour=hour, job_id=job_id, tenant=use.tenant, owner=use.owner,
                               name=use.name, gpu_seconds=0.0, cpu_seconds=0.0,
                               lost_gpu_seconds=0.0)  # fmt: skip
            s.add(row)
        row.gpu_seconds += use.gpu_s
        row.cpu_seconds += use.cpu_s
        row.lost_gpu_seconds += use.lost_s


def _add_queue(s: Session, queued_s: dict[tuple[float, str], float]) -> None:
    for (hour, tenant), seconds in queued_s.items():
        row = s.get(UsageQueueRow, (hour, tenant))
        if row is None:
            row = UsageQueueRow(hour=hour, tenant=tenant, queued_job_seconds=0.0)
            s.add(row)
        row.queued_job_seconds += seconds


def _wait_row(j: JobStart) -> UsageJobRow:
    return UsageJobRow(
        job_id=j.job_id, tenant=j.tenant, owner=j.owner, name=j.name,
        submitted_at=j.submitted_at, first_start=j.started_at,
        wait_s=max(0.0, j.started_at - j.submitted_at),
    )  # fmt: skip


def roll_up(sessions: sessionmaker[Session], now: float, elapsed_s: float = 0.0) -> Plan:
    """One pass: load, plan, apply; the plan it applied (for tests and logs). `elapsed_s`:
    how long the queues counted now are taken to have been so (since the last pass)."""
    spans, starts, queued = load(sessions)
    p = plan(spans, starts, now, queued, elapsed_s)
    apply(sessions, p)
    return p
