"""Sentences for waiting jobs: what blocks them, who holds the capacity, when they may start.

`estimate_start` works on the snapshot: it releases the running jobs in the order of their
deadlines (start + maxRuntime) until the job fits, and answers the deadline of the last one
released. It answers None when the job still does not fit once every job with a deadline is
released (a job without maxRuntime holds what it needs) or the release budget is spent. It
ignores other queued jobs that may start first: an estimate, not a promise. The releases
before the first after which a count bound lets the job fit are counted first, without
touching the snapshot (`FreeCounts.free_too`), and only then made.
"""

from __future__ import annotations

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


def deadlines(running: list[RunningJob]) -> list[tuple[float, str]]:
    out = [
        (r.started_at + r.max_runtime_s, r.job_id) for r in running if r.max_runtime_s is not None
    ]
    out.sort()
    return out


def estimate_start(
    state: ClusterState,
    by_deadline: list[tuple[float, str]],
    job: JobDemand,
    flavor: str | None,
    now: float,
    max_releases: int,
) -> float | None:
    releases = [(d, j) for d, j in by_deadline if j in state.charged][:max_releases]
    needed = FreeCounts(state.snapshot, job, flavor).releases_needed(
        state.charged[job_id].held for _, job_id in releases
    )
    if needed is None:
        return None
    first = max(0, needed - 1)  # made at once; the one that may let it fit is tried next
    need = job.total
    undos = [state.remove(job_id) for _, job_id in releases[:first]]
    try:
        for deadline, job_id in releases[first:]:
            undos.append(state.remove(job_id))
            if flavor and state.free(flavor) < need.gpus:
                continue
            if place_gang(state.snapshot, job, flavor) is not None:
                return max(now, deadline)
        return None
    finally:
        for undo in reversed(undos):
            undo()


def placed_in_queue(
    reason: PendingReason, position: int, length: int, tenant: str
) -> PendingReason:
    eta = reason.estimated_start
    return PendingReason(
        reason.code,
        f"{reason.message} ({ordinal(position)} of {length} in tenant {tenant})",
        position,
        length,
        eta,
    )


def behind(head: JobDemand, head_reason: PendingReason) -> PendingReason:
    return PendingReason(
        PendingCode.BEHIND,
        f"waiting for job {head.job_id} ahead of it in the queue ({head_reason.code})",
    )
