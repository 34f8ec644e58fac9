"""Reclaim and priority preemption: which running jobs to stop so that a job can start.

Candidates, cheapest loss first: jobs already terminating (their resources are coming back
anyway), then least progress in this attempt (GPUs × seconds run), newest; inside a tenant
its lowest priority first.
- Reclaim: a job within its tenant's guarantee may take back capacity from *opportunistic*
  jobs of other tenants (admitted with `borrowed`), while their tenant still borrows the
  resource. A guaranteed job of another tenant is never a candidate.
- Priority preemption (per tenant, `priority_preemption`): lower-priority jobs of the job's
  own tenant are candidates too (priority here is the job's standing: its class, then its
  priority).
- Priority classes: a job of any class but `opportunistic` may stop `opportunistic` jobs of
  any tenant, and they come first among the victims (after those already terminating); an
  `opportunistic` job stops nobody.
- LAS demotion (`SchedulerConfig.tenant_preemption`): *opportunistic* jobs of other
  tenants in a higher LAS queue (more attained GPU-seconds) than the job are candidates
  (`demotable`; borrowed capacity goes to the least served, as in Tiresias on the shared
  pool), and, for tenants with the `las` queue policy, such jobs of the job's own tenant of
  no higher priority too. A guaranteed job of another tenant is never one.

Priorities are per tenant (each bounded by its tenant's maxPriority): they are compared only
between jobs of one tenant. Across tenants only the quota (guaranteed or borrowing) and the
LAS queues count, and the victims' order puts a tenant's jobs, in the places they take
among the others' jobs, in its own priority order.

Victims are removed one by one on the snapshot until the job fits (simulated removal, each
undoable); then, from the last but one backwards, each victim is put back if the job still
fits without removing it (Kueue's minimal set). The snapshot is left as it was found.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from gpuyard.model import OPPORTUNISTIC_BELOW, JobDemand, JobPlacement, RunningJob, Tenant
from gpuyard.scheduler.packing import FreeCounts
from gpuyard.scheduler.quota import QuotaBook
from gpuyard.scheduler.snapshot import Undo
from gpuyard.scheduler.state import ClusterState
from gpuyard.scheduler.victimtable import Row

Fits = Callable[[], JobPlacement | None]


@dataclass(frozen=True, slots=True, init=False)
class Demotion:
    """Who a job may demote (LAS, `SchedulerConfig.tenant_preemption`): running jobs in a
    higher LAS queue than `level` (the job's: 0 once it is promoted); of the job's own
    tenant only if `own_tenant`, and then of no higher priority."""

    thresholds: tuple[float, ...]
    level: int
    own_tenant: bool

    def __init__(
        self, thresholds: tuple[float, ...], level: int, own_tenant: bool = True
    ) -> None:  # by hand: compiled, it is built natively (docs/sim.md, Fast replays)
        object.__setattr__(self, "thresholds", thresholds)
        object.__setattr__(self, "level", level)
        object.__setattr__(self, "own_tenant", own_tenant)


def demotion(
    job: JobDemand,
    thresholds: Sequence[float],
    own_tenant: bool = True,
    promoted: bool = False,
) -> Demotion:
    """`promoted`: the job waited past its wait limit and demotes as a job of the first
    queue, whatever service it received (Tiresias' promotion)."""
    level = 0 if promoted else las_level(thresholds, job.attained_gpu_s)
    return Demotion(tuple(thresholds), level, own_tenant)


def candidates(
    job: JobDemand,
    rows: Sequence[Row],
    tenants: Mapping[str, Tenant],
    reclaim: bool,
    now: float,
    demote: Demotion | None = None,
    stopping: Collection[str] = (),
    book: QuotaBook | None = None,
) -> list[RunningJob]:
    """Jobs (`VictimTable` rows) that may be stopped for `job`, in the victims' order:
    already terminating; then the `opportunistic` class; then, when `job` may demote, the
    highest LAS queue (the most served) first and the newest there (latest start: the least
    work of this attempt to lose), as Tiresias stops them; for reclaim alone, the least
    progress of this attempt (GPUs × seconds run), newest; a tenant's jobs in its places
    lowest standing first (`_by_priority_inside_tenants`). Candidates: jobs of the
    `opportunistic` class (unless `job` is one: it stops nobody); with `reclaim`,
    opportunistic or terminating jobs of other tenants; with the tenant's priority preemption, its
    lower-priority jobs; with `demote`, jobs it may demote (`Demotion`) that are of its
    tenant (of no higher priority) or opportunistic (whatever their priority). Jobs in
    `stopping` (preempted earlier in the cycle) count as terminating. With `book`, an
    opportunistic job of another tenant only while that tenant still borrows what it holds
    (`still_borrowing`: `find_victims` would skip it anyway)."""
    if job.opportunistic_class:
        return []  # it runs on idle capacity only
    own = tenants.get(job.tenant)
    same_tenant = own is not None and own.priority_preemption
    t, p = job.tenant, job.standing
    chosen: list[Row] = []
    borrows: dict[tuple, bool] = {}  # (tenant, borrowed) → still borrowing, for this call
    borrowers: dict[str, bool] = {}  # tenant → borrows anything now, for this call
    for given in rows:
        row = given
        r, tenant, prio, opportunistic, terminating, _, _, _ = row
        if stopping and not terminating and r.job_id in stopping:
            row = (r, tenant, prio, opportunistic, True, *given[5:])
            terminating = True
        if prio < OPPORTUNISTIC_BELOW:  # of the opportunistic class: any other job stops it
            chosen.append(row)
            continue
        if tenant != t:
            if not terminating:
                if not opportunistic:
                    continue
                if book is not None:
                    anything = borrowers.get(tenant)
                    if anything is None:
                        anything = borrowers[tenant] = book.borrows_any(tenant)
                    if not anything:
                        continue  # as `still_borrowing` would say for each of its jobs
                    known = borrows.get((tenant, r.borrowed))
                    if known is None:
                        known = borrows[tenant, r.borrowed] = still_borrowing(book, r, t)
                    if not known:
                        continue
            ok = reclaim
            may_demote = opportunistic
        else:
            ok = same_tenant and prio < p
            may_demote = demote is not None and demote.own_tenant
        # priorities are a tenant's own: compared only inside it (another tenant's job of a
        # higher priority is no shield against demotion, tests/security/test_priority_shield)
        if not ok and may_demote and demote is not None and (tenant != t or prio <= p):
            ok = _level(row, demote.thresholds, now) > demote.level
        if ok:
            chosen.append(row)
    if demote is not None:
        th = demote.thresholds
        chosen.sort(key=lambda row: (not row[4], _later(row), -_level(row, th, now), -row[5]))
    else:
        chosen.sort(key=lambda row: (not row[4], _later(row), *_loss(row, now)))
    return [row[0] for row in _by_priority_inside_tenants(chosen)]


def _by_priority_inside_tenants(chosen: list[Row]) -> list[Row]:
    """`chosen` (in the victims' order without priorities) with each tenant's rows
    reordered in its own places: terminating first, then the lowest priority. Which places
    a tenant's jobs take among other tenants' never depends on priorities, so no tenant
    can push its jobs behind another's by giving them a higher priority."""
    if len({row[2] for row in chosen}) < 2:
        return chosen  # one priority: the order stands (every replay of the simulator)
    places: dict[str, list[int]] = {}
    for i, row in enumerate(chosen):
        places.setdefault(row[1], []).append(i)
    out = list(chosen)
    for at in places.values():
        # stable: rows of one priority keep their order
        mine = sorted([chosen[i] for i in at], key=lambda row: (not row[4], row[2]))
        for i, row in zip(at, mine, strict=True):
            out[i] = row
    return out


def _later(row: Row) -> bool:
    """Not of the opportunistic class (those are stopped first)."""
    return row[2] >= OPPORTUNISTIC_BELOW


def _loss(row: Row, now: float) -> tuple[float, float]:
    """Progress of this attempt (GPUs × seconds run), then newest first."""
    return row[6] * max(0.0, now - row[5]), -row[5]


def _level(row: Row, thresholds: Sequence[float], now: float) -> int:
    return bisect.bisect_right(thresholds, row[7] + row[6] * max(0.0, now - row[5]))


def las_level(thresholds: Sequence[float], attained_gpu_s: float) -> int:
    """Tiresias' discretized LAS queue of a job that received `attained_gpu_s`."""
    return bisect.bisect_right(thresholds, attained_gpu_s)


def attained(r: RunningJob, now: float) -> float:
    """GPU-seconds `r` received: earlier attempts plus this one so far."""
    return r.attained_gpu_s + _progress(r, now)


def _progress(r: RunningJob, now: float) -> float:
    return r.gpus * max(0.0, now - r.started_at)


def still_borrowing(
    book: QuotaBook,
    r: RunningJob,
    tenant: str,
    stopping: Collection[str] = (),
    used: Mapping[tuple[str, str], int] | None = None,
) -> bool:
    """A victim of another tenant only while that tenant still borrows what it holds (any
    job, without quotas: the baselines on the shared pool). `used`: (tenant, key) → usage
    where a what-if differs from the book's."""
    if not book.enabled or r.tenant == tenant or r.terminating or r.job_id in stopping:
        return True
    if r.opportunistic_class:
        return True  # always on idle capacity: stopped for any other job
    used = used or {}
    return any(_borrows(book, used, r.tenant, key) for key, amount in r.borrowed if amount > 0)


def could_fit(
    state: ClusterState, job: JobDemand, flavors: Iterable[str | None], pool: list[RunningJob]
) -> bool:
    """Whether `job` might fit on one of `flavors` once every job of `pool` still charged
    were stopped (`packing.FreeCounts`' bound, with the GPUs each holds per node added up):
    False means no trial preemption from `pool` can succeed, so none is tried (it would
    remove the victims one by one and try the gang after each, for nothing)."""
    charged = state.charged
    for flavor in flavors:
        counts = FreeCounts(state.snapshot, job, flavor)
        if counts.possible():
            return True
        freed: dict[str, int] = {}
        for r in pool:
            c = charged.get(r.job_id)
            for node, f, n in c.gpus_on if c is not None else ():
                if flavor is None or f == flavor:
                    freed[node] = freed.get(node, 0) + n
        counts.count_free(freed)
        if counts.possible():
            return True
    return False


def removable(
    state: ClusterState, job: JobDemand, pool: list[RunningJob], stopping: Collection[str] = ()
) -> list[RunningJob]:
    """The jobs of `pool` that `find_victims` would remove, in order, if no placement were
    found first: those still charged whose removal `still_borrowing` allows when their turn
    comes. Worked out on a copy of the tenants' usage, the state untouched: a tenant's
    borrowing only falls as its jobs are removed, so a job skipped here would be skipped
    there too, and `could_fit` on this list is the exact bound of the removal loop."""
    book = state.book
    used: dict[tuple[str, str], int] = {}  # (tenant, key) → usage once the jobs before left
    out: list[RunningJob] = []
    for r in pool:
        c = state.charged.get(r.job_id)
        if c is None:
            continue
        if not still_borrowing(book, r, job.tenant, stopping, used):
            continue
        out.append(r)
        for key, amount in c.usage.items():
            used[c.tenant, key] = used.get((c.tenant, key), book.usage(c.tenant, key)) - amount
    return out


def _borrows(book: QuotaBook, used: Mapping[tuple[str, str], int], tenant: str, key: str) -> bool:
    """`book.borrowing(tenant, key) > 0` once usage is as in `used` (where it says)."""
    guaranteed = book.guarantee(tenant, key)
    return guaranteed is not None and used.get((tenant, key), book.usage(tenant, key)) > guaranteed


def find_victims(
    state: ClusterState,
    job: JobDemand,
    flavor: str | None,
    pool: list[RunningJob],
    fits: Fits,
    stopping: Collection[str] = (),
) -> tuple[list[RunningJob], JobPlacement] | None:
    """The smallest prefix-then-pruned set of `pool` whose removal lets `fits` succeed
    (`stopping`: jobs preempted earlier in the cycle, which count as terminating). The
    state is left as it was found: the victims hold their GPUs until they stop."""
    if not could_fit(state, job, (flavor,), pool):
        return None  # not even with all of them (the cheap bound first)
    if state.book.enabled:  # without quotas, every charged job of `pool` is removable
        kept = removable(state, job, pool, stopping)
        if len(kept) < len(pool) and not could_fit(state, job, (flavor,), kept):
            return None  # (all of them kept: the bound above holds for them)
        pool = kept
    tenant, counts = job.tenant, FreeCounts(state.snapshot, job, flavor)
    removed: list[tuple[RunningJob, Undo]] = []
    placement: JobPlacement | None = None
    try:
        for r in pool:
            if r.job_id not in state.charged or not still_borrowing(
                state.book, r, tenant, stopping
            ):
                continue
            held = state.charged[r.job_id].held
            removed.append((r, state.remove(r.job_id)))
            counts.update(t.node for t in held)
            placement = fits() if counts.possible() else None
            if placement is not None:
                break
        if placement is None:
            return None
        return _minimal(state, removed, fits, placement, counts)
    finally:
        for r, undo in reversed(removed):
            if r.job_id not in state.charged:
                undo()


def _minimal(
    state: ClusterState,
    removed: list[tuple[RunningJob, Undo]],
    fits: Fits,
    placement: JobPlacement,
    counts: FreeCounts,
) -> tuple[list[RunningJob], JobPlacement]:
    victims = [removed[-1][0]]
    for r, undo in reversed(removed[:-1]):
        undo()
        nodes = [t.node for t in state.charged[r.job_id].held]
        counts.update(nodes)
        again = fits() if counts.possible() else None
        if again is not None:
            placement = again
            continue
        state.remove(r.job_id)
        counts.update(nodes)
        victims.append(r)
    victims.reverse()
    return victims, placement
