"""Sentences for waiting jobs: what blocks them, who holds the capacity, when they may start.

`estimate_start` works on the snapshot: it releases the running jobs in the order of their
expected ends until the job fits, and answers the end of the last one released, with how
many of the ends released came from maxRuntime and how many were learned from history
(`StartEstimate.basis`). A job's expected end is its start + maxRuntime when it has one (it
ends by then at the latest), else its start + its expected run time (`expected_runtime_s`,
learned from its user's earlier runs); a job with neither, or one already past its learned
run time, has no expected end. The answer is None when the job still does not fit once every
job with an expected end is released, or the release budget is spent. It ignores other
queued jobs that may start first: an estimate, not a promise. The releases before the first
after which a count bound lets the job fit are counted first, without touching the snapshot
(`FreeCounts.free_too`), and only then made.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuyard.model import JobDemand, RunningJob
from gpuyard.scheduler.packing import FreeCounts, place_gang
from gpuyard.scheduler.quota import CPU, MEMORY, QuotaBook
from gpuyard.scheduler.reasons import PendingCode, PendingReason, ordinal
from gpuyard.scheduler.sharing import shared_count, shared_shortfall
from gpuyard.scheduler.state import ClusterState

MAX_HOLDERS = 4


def holders(book: QuotaBook, key: str) -> str:
    """`vision 24 (8 borrowed), nlp 8`: the biggest users of `key`, with what they borrow."""
    users = sorted(
        ((used.get(key, 0), tenant) for tenant, used in book.used.items() if used.get(key, 0)),
        reverse=True,
    )
    parts = []
    for amount, tenant in users[:MAX_HOLDERS]:
        borrowed = book.borrowing(tenant, key)
        parts.append(f"{tenant} {amount}" + (f" ({borrowed} borrowed)" if borrowed else ""))
    if len(users) > MAX_HOLDERS:
        parts.append(f"{len(users) - MAX_HOLDERS} more")
    return ", ".join(parts) or "nobody"


def capacity_reason(
    state: ClusterState, job: JobDemand, flavor: str | None, explain: bool = True
) -> PendingReason:
    """Fragmented (enough free in total, not where the gang needs it) or Insufficient; with
    no message unless `explain` (`SchedulerConfig.explain`)."""
    total, snap = job.total, state.snapshot
    if short := shared_shortfall(snap, job, flavor):  # no shared GPU with room (sharing.py)
        return PendingReason(PendingCode.INSUFFICIENT, short if explain else "")
    free_gpus = state.free(flavor) if flavor else 0
    enough = (
        free_gpus >= total.gpus
        and snap.free_cpu_milli >= total.cpu_milli
        and snap.free_memory_mb >= total.memory_mb
    )
    if not explain:
        return PendingReason(PendingCode.FRAGMENTED if enough else PendingCode.INSUFFICIENT, "")
    what = _what(job, flavor)
    if enough:
        return PendingReason(
            PendingCode.FRAGMENTED,
            f"needs {what}; {free_gpus} GPUs are free in total but scattered: at most "
            f"{state.snapshot.largest_hole(flavor)} free on one node",
        )
    key = (
        flavor
        if total.gpus and flavor
        else (CPU if total.cpu_milli > snap.free_cpu_milli else MEMORY)
    )
    free_words = f"{free_gpus} free" if total.gpus else "not enough CPU or memory free"
    if total.gpus and (in_shared_mode := shared_count(snap, flavor)):
        free_words += f", {in_shared_mode} in shared mode (never given whole)"
    return PendingReason(
        PendingCode.INSUFFICIENT,
        f"needs {what}; {free_words}; held by {holders(state.book, key)}",
    )


def _what(job: JobDemand, flavor: str | None) -> str:
    total = job.total
    tasks = len(job.tasks)
    gpus = f"{total.gpus} {flavor} GPUs" if total.gpus else f"{total.cpu:g} CPUs"
    return gpus + (f" as {tasks} tasks" if tasks > 1 else "")


Deadline = tuple[float, str, bool]  # (expected end, job id, learned from history)


@dataclass(frozen=True, slots=True)
class StartEstimate:
    """When a blocked job should start (`at`), and the running jobs whose expected ends it
    waits for: `by_max_runtime` of them end by their maxRuntime, `learned` by a run time
    learned from history."""

    at: float
    by_max_runtime: int
    learned: int

    def basis(self) -> str:
        """`the run times of 3 running jobs: 2 by maxRuntime, 1 learned from history`."""
        n = self.by_max_runtime + self.learned
        parts = [
            f"{k} {what}"
            for k, what in (
                (self.by_max_runtime, "by maxRuntime"),
                (self.learned, "learned from history"),
            )
            if k
        ]
        return f"the run times of {n} running job{'' if n == 1 else 's'}: {', '.join(parts)}"


def deadlines(running: list[RunningJob]) -> list[Deadline]:
    """Each running job's expected end, soonest first: start + maxRuntime, else start + its
    learned run time; jobs with neither are left out."""
    out: list[Deadline] = []
    for r in running:
        if r.max_runtime_s is not None:
            out.append((r.started_at + r.max_runtime_s, r.job_id, False))
        elif r.expected_runtime_s is not None:
            out.append((r.started_at + r.expected_runtime_s, r.job_id, True))
    out.sort()
    return out


def estimate_start(
    state: ClusterState,
    by_deadline: list[Deadline],
    job: JobDemand,
    flavor: str | None,
    now: float,
    max_releases: int,
) -> StartEstimate | None:
    """When `job` should fit, releasing the jobs of `by_deadline` in order (a learned end
    already past is no estimate: the job ran longer than its history says)."""
    releases = [
        (d, j, learned)
        for d, j, learned in by_deadline
        if j in state.charged and not (learned and d <= now)
    ][:max_releases]
    needed = FreeCounts(state.snapshot, job, flavor).releases_needed(
        state.charged[job_id].held for _, job_id, _ in releases
    )
    if needed is None:
        return None
    first = max(0, needed - 1)  # made at once; the one that may let it fit is tried next
    need = job.total
    undos = [state.remove(job_id) for _, job_id, _ in releases[:first]]
    try:
        for i in range(first, len(releases)):
            deadline, job_id, _ = releases[i]
            undos.append(state.remove(job_id))
            if flavor and state.free(flavor) < need.gpus:
                continue
            if place_gang(state.snapshot, job, flavor) is not None:
                learned = sum(1 for _, _, by_history in releases[: i + 1] if by_history)
                return StartEstimate(max(now, deadline), i + 1 - learned, learned)
        return None
    finally:
        for undo in reversed(undos):
            undo()


def with_estimate(
    reason: PendingReason,
    state: ClusterState,
    by_deadline: list[Deadline],
    head: JobDemand,
    flavor: str | None,
    now: float,
    max_releases: int,
) -> PendingReason:
    """`reason` with the head's estimated start, and what it rests on, when one can be made:
    "...; estimated start in 40 min (from the run times of 3 running jobs: 2 by maxRuntime,
    1 learned from history)"."""
    eta = estimate_start(state, by_deadline, head, flavor, now, max_releases)
    if eta is None:
        return reason
    minutes = max(0.0, eta.at - now) / 60
    basis = eta.basis()
    return PendingReason(
        reason.code,
        f"{reason.message}; estimated start in {minutes:.0f} min (from {basis})",
        estimated_start=eta.at,
        eta_basis=basis,
    )


def placed_in_queue(
    reason: PendingReason, position: int, length: int, tenant: str
) -> PendingReason:
    return PendingReason(
        reason.code,
        f"{reason.message} ({ordinal(position)} of {length} in tenant {tenant})",
        position,
        length,
        reason.estimated_start,
        reason.eta_basis,
    )


def without_place(message: str, position: int | None, length: int | None, tenant: str) -> str:
    """`message` without the place `placed_in_queue` gave it, if it has that one."""
    if position is None or length is None:
        return message
    return message.removesuffix(f" ({ordinal(position)} of {length} in tenant {tenant})")


def behind(head: JobDemand, head_reason: PendingReason) -> PendingReason:
    return PendingReason(
        PendingCode.BEHIND,
        f"waiting for job {head.job_id} ahead of it in the queue ({head_reason.code})",
    )
