"""EASY backfill for a promoted job: once a job has waited past its wait limit and still
cannot start, it reserves its expected start time, and a later admission of this cycle may
not delay it.

The promoted job's expected start comes from the running jobs' expected ends
(`explain.estimate_start`: maxRuntime, else a run time learned from history). Another job
may start before it only if (1) it is expected to end by then itself (its maxRuntime or
learned run time), or (2) the promoted job's expected start is no later once that job is
charged (it uses capacity the promoted job does not need by then). Nothing is reserved when
the start cannot be estimated (a running job it waits for has neither maxRuntime nor
history): backfill then goes on unrestricted, as it does on traces without run times.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuyard.model import JobDemand, JobPlacement
from gpuyard.scheduler.explain import Deadline, estimate_start
from gpuyard.scheduler.quota import quota_tenant
from gpuyard.scheduler.reasons import PendingCode, PendingReason
from gpuyard.scheduler.state import ClusterState


@dataclass(frozen=True, slots=True)
class Reservation:
    """`job` (promoted) is expected to start at `at` on `flavor`."""

    job: JobDemand
    flavor: str | None
    at: float

    def refusal(self, now: float) -> PendingReason:
        minutes = max(0.0, self.at - now) / 60
        return PendingReason(
            PendingCode.BEHIND,
            f"would delay job {self.job.job_id} of tenant {self.job.tenant}, which waited past "
            f"its limit and is expected to start in {minutes:.0f} min (EASY backfill: only "
            f"jobs expected to end by then, or that leave it the room, start before it)",
        )


def reserve(
    state: ClusterState,
    by_deadline: list[Deadline],
    job: JobDemand,
    flavor: str | None,
    now: float,
    max_releases: int,
) -> Reservation | None:
    eta = estimate_start(state, by_deadline, job, flavor, now, max_releases)
    return None if eta is None else Reservation(job, flavor, eta.at)


def expected_end(job: JobDemand, now: float) -> float | None:
    """When `job` would end if it started now: its maxRuntime or learned run time, the
    shorter (None: neither is known)."""
    known = [s for s in (job.max_runtime_s, job.expected_runtime_s) if s is not None]
    return now + min(known) if known else None


def delays(
    state: ClusterState,
    by_deadline: list[Deadline],
    reservation: Reservation,
    job: JobDemand,
    placement: JobPlacement,
    now: float,
    max_releases: int,
) -> bool:
    """Whether starting `job` at `placement` now would start the reserved job later."""
    end = expected_end(job, now)
    if end is not None and end <= reservation.at:
        return False
    charged = quota_tenant(job.tenant, job.opportunistic_class)
    undo = state.charge(job.job_id, charged, placement.tasks)
    try:
        held = reservation.job
        after = estimate_start(state, by_deadline, held, reservation.flavor, now, max_releases)
    finally:
        undo()
    return after is None or after.at > reservation.at
