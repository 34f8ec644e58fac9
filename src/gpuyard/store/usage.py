"""GPU service received, from the task rows: per job (for LAS), per tenant (for budgets), and
how long succeeded jobs ran (for run-time estimates, `run_times`).

A task holds its GPUs from `started_at` to `finished_at` (or to `now` while it runs): each
whole GPU counts one; a shared task (`gpu_memory_mb` of one GPU) counts the part of that
GPU's memory it holds, as the nodes report it (a whole GPU when the node is not known).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session, sessionmaker

from gpuyard.model import JobState
from gpuyard.store.tables import JobRow, NodeRow, TaskRow

RUN_TIMES_LIMIT = 5000  # the most recent succeeded jobs read at a controller's start


@dataclass(frozen=True, slots=True)
class JobRunTime:
    """A succeeded job's run time: each attempt's first task start to its last task end,
    summed over its attempts (preempted and retried ones included)."""

    job_id: str
    tenant: str
    owner: str | None
    name: str
    runtime_s: float
    finished_at: float


GpuMemory = Mapping[tuple[str, int], int]  # (node, GPU index) → its memory, MB


def _gpu_seconds(row: TaskRow, since: float, now: float, memory: GpuMemory) -> float:
    if row.started_at is None:
        return 0.0
    start = max(row.started_at, since)
    end = row.finished_at if row.finished_at is not None else now
    return max(0.0, end - start) * gpus_held(row, memory)


def gpus_held(row: TaskRow, memory: GpuMemory) -> float:
    """Whole GPUs count one each; a shared task (`gpu_memory_mb`) the part of its GPU's
    memory it holds (docs/gpu-sharing.md), or a whole GPU when that GPU is not known."""
    gpus = json.loads(row.gpus)
    if not row.gpu_memory_mb or not gpus:
        return float(len(gpus))
    total = memory.get((row.node, gpus[0]))
    return min(1.0, row.gpu_memory_mb / total) if total else 1.0


def gpu_memory(s: Session) -> dict[tuple[str, int], int]:
    return {
        (node, gpu["index"]): gpu["memory_mb"]
        for node, gpus in s.execute(select(NodeRow.name, NodeRow.gpus))
        for gpu in json.loads(gpus)
    }


class UsageRepo:
    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    def attained_by_job(self, job_ids: Iterable[str], now: float) -> dict[str, float]:
        """GPU-seconds each job has received over all its attempts so far."""
        ids = list(job_ids)
        out: dict[str, float] = dict.fromkeys(ids, 0.0)
        if not ids:
            return out
        q = select(TaskRow).where(TaskRow.job_id.in_(ids), TaskRow.started_at.is_not(None))
        with self._sessions() as s:
            memory = gpu_memory(s)
            for row in s.scalars(q):
                out[row.job_id] += _gpu_seconds(row, 0.0, now, memory)
        return out

    def by_tenant(self, since: float, now: float) -> dict[str, float]:
        """GPU-seconds each tenant's jobs have used since `since` (a budget period's start)."""
        q = (
            select(TaskRow, JobRow.tenant)
            .join(JobRow, JobRow.id == TaskRow.job_id)
            .where(TaskRow.started_at.is_not(None))
            .where(or_(TaskRow.finished_at.is_(None), TaskRow.finished_at >= since))
        )
        out: dict[str, float] = defaultdict(float)
        with self._sessions() as s:
            memory = gpu_memory(s)
            for row, tenant in s.execute(q):
                out[tenant] += _gpu_seconds(row, since, now, memory)
        return dict(out)

    def run_times(
        self, job_ids: Collection[str] | None = None, limit: int = RUN_TIMES_LIMIT
    ) -> list[JobRunTime]:
        """The run times of the `limit` last succeeded jobs (of `job_ids` if given), oldest
        end first: the order a run-time estimator learns them in."""
        jobs = select(JobRow.id).where(JobRow.state == str(JobState.SUCCEEDED))
        if job_ids is not None:
            jobs = jobs.where(JobRow.id.in_(list(job_ids)))
        jobs = jobs.order_by(JobRow.finished_at.desc()).limit(limit)
        spans = (
            select(
                TaskRow.job_id,
                func.min(TaskRow.started_at).label("start"),
                func.max(TaskRow.finished_at).label("end"),
            )
            .where(TaskRow.job_id.in_(jobs.scalar_subquery()), TaskRow.started_at.is_not(None))
            .group_by(TaskRow.job_id, TaskRow.attempt)
            .subquery()
        )
        q = (
            select(JobRow, func.sum(spans.c.end - spans.c.start))
            .join(spans, spans.c.job_id == JobRow.id)
            .group_by(JobRow.id)
            .order_by(JobRow.finished_at)
        )
        with self._sessions() as s:
            return [
                JobRunTime(j.id, j.tenant, j.owner, j.name, max(0.0, ran or 0.0), j.finished_at)
                for j, ran in s.execute(q)
            ]
