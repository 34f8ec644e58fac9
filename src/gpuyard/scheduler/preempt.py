"""Reclaim and priority preemption: which running jobs to stop so that a job can start.

Candidates, cheapest loss first: jobs already terminating (their resources are coming back
anyway), then by lowest priority, least progress in this attempt (GPUs × seconds run), newest.
- Reclaim: a job within its tenant's guarantee may take back capacity from *opportunistic*
  jobs of other tenants (admitted with `borrowed`), while their tenant still borrows the
  resource. A guaranteed job of another tenant is never a candidate.
- Priority preemption (per tenant, `priority_preemption`): lower-priority jobs of the job's
  own tenant are candidates too.
- LAS demotion (`SchedulerConfig.tenant_preemption`): *opportunistic* jobs of other
  tenants, of no higher priority, in a higher LAS queue (more attained GPU-seconds) than the
  job are candidates (`demotable`; borrowed capacity goes to the least served, as in
  Tiresias on the shared pool), and, for tenants with the `las` queue policy, such jobs of
  the job's own tenant too. A guaranteed job of another tenant is never one.

Victims are removed one by one on the snapshot until the job fits (simulated removal, each
undoable); then, from the last but one backwards, each victim is put back if the job still
fits without removing it (Kueue's minimal set). The snapshot is left as it was found.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence

from gpuyard.model import JobDemand, JobPlacement, RunningJob, Tenant
from gpuyard.scheduler.quota import QuotaBook
from gpuyard.scheduler.snapshot import Undo
from gpuyard.scheduler.state import ClusterState

Fits = Callable[[], JobPlacement | None]


def candidates(
    job: JobDemand,
    running: Sequence[RunningJob],
    tenants: Mapping[str, Tenant],
    reclaim: bool,
    now: float,
    demotable: Callable[[RunningJob], bool] | None = None,
    level: Callable[[RunningJob], int] | None = None,
) -> list[RunningJob]:
    """Jobs that may be stopped for `job`, cheapest loss first (with `level`, the highest
    LAS queue first among jobs of one priority: the most served are demoted first)."""
    own = tenants.get(job.tenant)
    same_tenant = own is not None and own.priority_preemption
    chosen = [
        r
        for r in running
        if r.preemptible
        and (
            (reclaim and r.tenant != job.tenant and (r.opportunistic or r.terminating))
            or (same_tenant and r.tenant == job.tenant and r.priority < job.priority)
            or (
                demotable is not None
                and (r.tenant == job.tenant or r.opportunistic)
                and demotable(r)
            )
        )
    ]
    if level is None:
        chosen.sort(key=lambda r: (not r.terminating, r.priority, _progress(r, now), -r.started_at))
    else:
        chosen.sort(
            key=lambda r: (
                not r.terminating,
                r.priority,
                -level(r),
                _progress(r, now),
                -r.started_at,
            )
        )
    return chosen


def las_level(thresholds: Sequence[float], attained_gpu_s: float) -> int:
    """Tiresias' discretized LAS queue of a job that received `attained_gpu_s`."""
    return bisect.bisect_right(thresholds, attained_gpu_s)


def attained(r: RunningJob, now: float) -> float:
    """GPU-seconds `r` received: earlier attempts plus this one so far."""
    return r.attained_gpu_s + _progress(r, now)


def demotion(
    job: JobDemand,
    thresholds: Sequence[float],
    now: float,
    min_run_s: float = 0.0,
    own_tenant: bool = True,
) -> Callable[[RunningJob], bool]:
    """Running jobs `job` may demote: no higher priority, a higher LAS queue than `job`, and
    running for at least `min_run_s` since their last (re)start (a quantum, so that a job is
    not stopped again right after it started); of `job`'s own tenant only if `own_tenant`."""
    mine = las_level(thresholds, job.attained_gpu_s)

    def demotable(r: RunningJob) -> bool:
        return (
            (own_tenant or r.tenant != job.tenant)
            and r.priority <= job.priority
            and now - r.started_at >= min_run_s
            and las_level(thresholds, attained(r, now)) > mine
        )

    return demotable


def _progress(r: RunningJob, now: float) -> float:
    return r.gpus * max(0.0, now - r.started_at)


def still_borrowing(book: QuotaBook, r: RunningJob, tenant: str) -> bool:
    """A victim of another tenant only while that tenant still borrows what it holds."""
    if r.tenant == tenant or r.terminating:
        return True
    return any(book.borrowing(r.tenant, key) > 0 for key, amount in r.borrowed if amount > 0)


def find_victims(
    state: ClusterState, tenant: str, pool: list[RunningJob], fits: Fits
) -> tuple[list[RunningJob], JobPlacement] | None:
    """The smallest prefix-then-pruned set of `pool` whose removal lets `fits` succeed."""
    removed: list[tuple[RunningJob, Undo]] = []
    placement: JobPlacement | None = None
    try:
        for r in pool:
            if r.job_id not in state.charged or not still_borrowing(state.book, r, tenant):
                continue
            removed.append((r, state.remove(r.job_id)))
            placement = fits()
            if placement is not None:
                break
        if placement is None:
            return None
        return _minimal(state, removed, fits, placement)
    finally:
        for r, undo in reversed(removed):
            if r.job_id not in state.charged:
                undo()


def _minimal(
    state: ClusterState,
    removed: list[tuple[RunningJob, Undo]],
    fits: Fits,
    placement: JobPlacement,
) -> tuple[list[RunningJob], JobPlacement]:
    victims = [removed[-1][0]]
    for r, undo in reversed(removed[:-1]):
        undo()
        again = fits()
        if again is not None:
            placement = again
            continue
        state.remove(r.job_id)
        victims.append(r)
    victims.reverse()
    return victims, placement
