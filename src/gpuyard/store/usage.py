"""GPU service received, from the task rows: per job (for LAS) and per tenant (for budgets).

A task holds `len(gpus)` GPUs from `started_at` to `finished_at` (or to `now` while it runs).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable

from sqlalchemy import or_, select
from sqlalchemy.orm import Session, sessionmaker

from gpuyard.store.tables import JobRow, TaskRow


def _gpu_seconds(row: TaskRow, since: float, now: float) -> float:
    if row.started_at is None:
        return 0.0
    start = max(row.started_at, since)
    end = row.finished_at if row.finished_at is not None else now
    return max(0.0, end - start) * len(json.loads(row.gpus))


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
            for row in s.scalars(q):
                out[row.job_id] += _gpu_seconds(row, 0.0, now)
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
            for row, tenant in s.execute(q):
                out[tenant] += _gpu_seconds(row, since, now)
        return dict(out)
