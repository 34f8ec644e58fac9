"""One scheduling cycle: which queued jobs start now, where, and why the others wait.

`schedule` is a pure function of its inputs (no I/O, no clock, no store): the controller and
the simulator call it alike. It reads as its phases:

1. heads    — the queued jobs, in queue order (priority, then submission);
2. snapshot — a working copy of what is free, charged as jobs are admitted;
3. nominate — for each head: does it fit, and if not, can it ever fit;
4. order    — the order in which nominated jobs are admitted;
5. admit    — assume each placement on the snapshot; the controller persists it;
6. requeue  — every job not admitted gets a pending reason.

Queue discipline (v1): strict priority-then-FIFO among jobs that can run at all. A job that
fits now but sits behind one that does not waits (no starvation of big jobs); a job that can
never run on this cluster (too big, unknown GPU type) does not block the queue.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from gpuyard.model import JobDemand, JobPlacement, Node, TaskPlacement
from gpuyard.scheduler.placement import explain_no_fit, place_job
from gpuyard.scheduler.reasons import PendingCode, PendingReason
from gpuyard.scheduler.snapshot import ClusterSnapshot
from gpuyard.scheduler.view import Admission, Preemption


@dataclass(frozen=True, slots=True, init=False)
class CycleStats:
    considered: int
    admitted: int
    unschedulable: int

    def __init__(self, considered: int = 0, admitted: int = 0, unschedulable: int = 0) -> None:
        # by hand: compiled, it is built natively (docs/sim.md, Fast replays)
        object.__setattr__(self, "considered", considered)
        object.__setattr__(self, "admitted", admitted)
        object.__setattr__(self, "unschedulable", unschedulable)


@dataclass(frozen=True, slots=True, init=False)
class CycleResult:
    """What a cycle decided. `admissions[i]` says how `admit[i]` was admitted (guaranteed or
    opportunistic); `preempt` lists the running jobs to stop (none from v1 `schedule`)."""

    admit: tuple[JobPlacement, ...]
    preempt: tuple[Preemption, ...]
    pending_reasons: Mapping[str, PendingReason]
    stats: CycleStats
    admissions: tuple[Admission, ...]

    def __init__(
        self,
        admit: tuple[JobPlacement, ...] = (),
        preempt: tuple[Preemption, ...] = (),
        pending_reasons: Mapping[str, PendingReason] | None = None,
        stats: CycleStats = CycleStats(),
        admissions: tuple[Admission, ...] = (),
    ) -> None:  # by hand: compiled, it is built natively (docs/sim.md, Fast replays)
        object.__setattr__(self, "admit", admit)
        object.__setattr__(self, "preempt", preempt)
        object.__setattr__(
            self, "pending_reasons", {} if pending_reasons is None else pending_reasons
        )
        object.__setattr__(self, "stats", stats)
        object.__setattr__(self, "admissions", admissions)


def queue_order(job: JobDemand) -> tuple[int, int]:
    return (-job.priority, job.seq)


def schedule(
    nodes: Iterable[Node],
    held: Iterable[TaskPlacement],
    queued: Sequence[JobDemand],
) -> CycleResult:
    # 1. heads: every queued job, in queue order.
    heads = sorted(queued, key=queue_order)
    job_tenant = {j.job_id: j.tenant for j in heads}
    # 2. snapshot: what is free once the running jobs are charged.
    snapshot = ClusterSnapshot(nodes, held)
    # 3. nominate: jobs that can never run here are set aside with their reason.
    nominated, pending = _nominate(snapshot, heads)
    # 4. order: queue order among the runnable (kept from phase 1).
    admit: list[JobPlacement] = []
    blocker: JobDemand | None = None
    for job in nominated:
        # 5. admit: assume the placement on the snapshot until one job cannot fit.
        placement = None if blocker else place_job(snapshot, job)
        if placement is not None:
            snapshot.assume(placement)
            admit.append(placement)
            continue
        # 6. requeue: the first job that does not fit blocks the ones behind it.
        if blocker is None:
            blocker = job
            pending[job.job_id] = explain_no_fit(snapshot, job)
        else:
            pending[job.job_id] = _behind(blocker, job)
    stats = CycleStats(len(heads), len(admit), len(heads) - len(nominated))
    admissions = tuple(Admission(p.job_id, job_tenant[p.job_id]) for p in admit)
    return CycleResult(tuple(admit), (), pending, stats, admissions)


def _nominate(
    snapshot: ClusterSnapshot, heads: list[JobDemand]
) -> tuple[list[JobDemand], dict[str, PendingReason]]:
    runnable: list[JobDemand] = []
    pending: dict[str, PendingReason] = {}
    idle = ClusterSnapshot(nf.node for nf in snapshot.schedulable())
    for job in heads:
        if place_job(idle, job) is not None:
            runnable.append(job)
        else:
            pending[job.job_id] = explain_no_fit(snapshot, job)
    return runnable, pending


def _behind(blocker: JobDemand, job: JobDemand) -> PendingReason:
    return PendingReason(
        PendingCode.BEHIND,
        f"waiting for job {blocker.job_id} ahead in the queue "
        f"(priority {blocker.priority}, needs {blocker.total.gpus} GPUs) to start first",
    )
