"""Reading the usage roll-up (`store/rollup.py`): its hour rows and its job waits in a time
window, for the tenants a caller may see. Grouping and statistics are the API's
(`api/services/usage.py`)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, select
from sqlalchemy.orm import Session, sessionmaker

from gpuyard.store import rollup
from gpuyard.store.tables import UsageHourRow, UsageJobRow, UsageQueueRow


@dataclass(frozen=True, slots=True)
class UsageHour:
    hour: float
    job_id: str
    tenant: str
    owner: str | None
    name: str
    gpu_seconds: float
    cpu_seconds: float
    lost_gpu_seconds: float


@dataclass(frozen=True, slots=True)
class JobWait:
    job_id: str
    tenant: str
    owner: str | None
    name: str
    first_start: float
    wait_s: float


class AccountingRepo:
    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    def roll_up(self, now: float, elapsed_s: float = 0.0) -> rollup.Plan:
        """Account the task rows up to `now`, and the queues as they are for the `elapsed_s`
        since the last pass (the controller's job)."""
        return rollup.roll_up(self._sessions, now, elapsed_s)

    def queued(
        self, since: float, until: float, tenants: Collection[str] | None = None
    ) -> list[tuple[float, str, float]]:
        """(hour, tenant, queued job-seconds) of the hours starting in [since, until)."""
        q = select(UsageQueueRow).where(UsageQueueRow.hour >= since, UsageQueueRow.hour < until)
        q = _of(q, UsageQueueRow.tenant, tenants).order_by(UsageQueueRow.hour)
        with self._sessions() as s:
            return [(r.hour, r.tenant, r.queued_job_seconds) for r in s.scalars(q)]

    def hours(
        self, since: float, until: float, tenants: Collection[str] | None = None
    ) -> list[UsageHour]:
        """The hour rows of hours starting in [since, until), of `tenants` (None: all)."""
        q = select(UsageHourRow).where(UsageHourRow.hour >= since, UsageHourRow.hour < until)
        q = _of(q, UsageHourRow.tenant, tenants).order_by(UsageHourRow.hour)
        with self._sessions() as s:
            return [_hour(r) for r in s.scalars(q)]

    def waits(
        self, since: float, until: float, tenants: Collection[str] | None = None
    ) -> list[JobWait]:
        """The waits of the jobs that first started in [since, until)."""
        q = select(UsageJobRow).where(
            UsageJobRow.first_start >= since, UsageJobRow.first_start < until
        )
        q = _of(q, UsageJobRow.tenant, tenants).order_by(UsageJobRow.first_start)
        with self._sessions() as s:
            return [
                JobWait(r.job_id, r.tenant, r.owner, r.name, r.first_start, r.wait_s)
                for r in s.scalars(q)
            ]


def _of(q: Select[Any], column: Any, tenants: Collection[str] | None) -> Select[Any]:
    return q if tenants is None else q.where(column.in_(list(tenants)))


def _hour(r: UsageHourRow) -> UsageHour:
    return UsageHour(
        r.hour, r.job_id, r.tenant, r.owner, r.name,
        r.gpu_seconds, r.cpu_seconds, r.lost_gpu_seconds,
    )  # fmt: skip
