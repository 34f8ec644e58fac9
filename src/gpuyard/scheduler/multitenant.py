"""The multi-tenant scheduling cycle: quotas, borrowing, reclaim, fair share, limits, reasons.

`Scheduler().cycle(view)` is a pure function of `view` as far as its result goes; the object
keeps caches between cycles (the synced snapshot, sorted tenant queues, per-shape fit results,
parked tenants), never truth. It reads as its phases:

1. heads    — each tenant's queue in its order; a tenant's head is its first job that may be
              considered now (jobs that can never run, or whose user is at a limit, are set
              aside with their reason and do not block the others);
2. snapshot — free capacity and quota usage, in step with the running jobs;
3. nominate — each tenant's head;
4. order    — tenants by weighted dominant share, lowest first (then age; never priority);
5. admit    — the lowest-share tenant's head starts if quota and placement allow, and the
              tenant's next job becomes its head; a head that cannot start may reclaim
              (preempt borrowers) or demote (LAS: jobs of a higher queue), and otherwise
              blocks its tenant's order; with `tenant_backfill`, later jobs of the tenant
              that fit now, or can make room by demotion, may still start. A job that waited
              past its wait limit is promoted (front of its queue, demotes as a job of the
              first LAS queue) instead of holding its tenant back (issue 16);
6. requeue  — every job not admitted gets a reason, its position and, when known, an
              estimated start.

`SchedulerConfig.policy` other than `default` hands every cycle to a baseline policy
(`baselines.py`) instead.

Parking (Kueue): a tenant whose head could not start is not re-examined while nothing that
could help it changed — same head, same nodes and tenants, no resource it can use released,
and, for a head that may demote, no running job crossed into a higher LAS queue since
(`Blocked.wake_at`).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

from gpuyard.model import JobPlacement
from gpuyard.scheduler.baselines import Baseline, make_baseline
from gpuyard.scheduler.cycle import CycleResult, CycleStats
from gpuyard.scheduler.fits import ShapeFits
from gpuyard.scheduler.mirror import Numbering
from gpuyard.scheduler.order import TenantQueues
from gpuyard.scheduler.round import Blocked, Facts, Round, own_jobs_preemptible
from gpuyard.scheduler.state import ClusterState
from gpuyard.scheduler.victimtable import VictimTable
from gpuyard.scheduler.view import ClusterView, SchedulerConfig


@dataclass(frozen=True, slots=True, init=False)
class Parked:
    """A tenant's head that could not start, and how (`Blocked`: its reason, what wakes
    it)."""

    head: str
    aged: bool
    outcome: Blocked

    def __init__(self, head: str, aged: bool, outcome: Blocked) -> None:
        # by hand: compiled, it is built natively (docs/sim.md, Fast replays)
        object.__setattr__(self, "head", head)
        object.__setattr__(self, "aged", aged)
        object.__setattr__(self, "outcome", outcome)


class Scheduler:
    def __init__(self, config: SchedulerConfig | None = None) -> None:
        self.config = config or SchedulerConfig()
        self._state = ClusterState()
        self._queues = TenantQueues(self.config)
        self._numbering = Numbering()
        self._fits = ShapeFits()
        self._parked: dict[str, Parked] = {}
        self._facts: dict[str, Facts] = {}  # job id → what its admission needs, see Round
        self._victims = VictimTable()  # what preemption reads of each running job
        self._baseline: Baseline | None = None
        self._unsettled = 0  # heads of the last cycle a later one might decide otherwise
        self._wake_at = math.inf  # a failed demotion of the last cycle might succeed then
        if self.config.policy != "default":
            self._baseline = make_baseline(self.config)

    def quiet_until(self, view: ClusterView) -> float:
        """After a cycle on `view` that decided nothing: until when the same queue and
        running jobs decide nothing either (a baseline answers for itself).

        `default`: until the next queued job ages (is promoted) or the first running job
        that a failed demotion could take crosses into a higher LAS queue (`Round.wake_at`),
        if every head's outcome in that cycle was settled (`Blocked.settled`). A head that
        waited (`_wait`) is parked in the next cycle, with the same reason, and not tried
        again while nothing is released and no such crossing came; a backfill candidate that
        did not fit, and could not make room, still cannot on the same snapshot with the
        same LAS queues. So the next cycle decides nothing either. The victims' order by
        progress for reclaim changes with time alone, but is read only by a head waiting for
        its victims to stop (unsettled: `now`, nothing skipped). Budgets (usage grows with
        time) give no hint either."""
        if self._baseline is not None:
            return self._baseline.quiet_until(view)
        if self._unsettled or any(t.gpu_hour_budget is not None for t in view.tenants.values()):
            return view.now
        return min(self._queues.next_aging(), self._wake_at)

    def cycle(self, view: ClusterView) -> CycleResult:
        if self._baseline is not None:
            return self._baseline.cycle(view)
        # 1. heads: each tenant's queue, in order (re-sorted only where it changed).
        changes = self._numbering.follow(view)  # what changed since the last view, if known
        queues = self._queues.sync(view, changes)
        # 2. snapshot: what is free and who uses what, synced with the running jobs.
        self._state.sync(view.nodes, view.tenants, view.running, changes)
        self._fits.sync(view.nodes, self._state.rebuilt)
        self._victims.sync(view.running, changes, own_jobs_preemptible(view.tenants, self.config))
        self._unpark_changed(view.now)
        self._keep_facts()
        rnd = Round(
            view,
            self.config,
            self._state,
            self._queues.jobs,
            queues,
            self._fits,
            self._facts,
            self._victims,
            self._queues.narrowest,
        )
        # 3. nominate: the first job of each tenant that may be considered now.
        self._unsettled = 0
        heap = [rnd.order_key(t) for t in queues if rnd.advance(t)]
        # 4. order: tenants by weighted dominant share, lowest first.
        heapq.heapify(heap)
        # 5. admit: the head of the lowest-share tenant, until every tenant is done or blocked.
        while heap:
            tenant = heapq.heappop(heap)[-1]
            self._admit_head(rnd, tenant)
            if rnd.next_head(tenant):
                heapq.heappush(heap, rnd.order_key(tenant))
        # 6. requeue: every job not admitted gets its reason, position and estimate.
        self._wake_at = rnd.wake_at
        return rnd.result(CycleStats(len(view.queued), len(rnd.admitted), rnd.set_aside))

    def _admit_head(self, rnd: Round, tenant: str) -> bool:
        head = rnd.head(tenant)
        if rnd.backfilling(tenant):  # behind the tenant's blocked head: parking is the head's
            return isinstance(rnd.try_admit(tenant, head), JobPlacement)
        parked = self._parked.get(tenant)
        if parked and self._still_parked(parked, head.job_id, rnd):
            rnd.block(tenant, parked.outcome)
            rnd.reinstate(parked.outcome)
            return False
        outcome = rnd.try_admit(tenant, head)
        if isinstance(outcome, JobPlacement):
            self._parked.pop(tenant, None)
            return True
        self._unsettled += not outcome.settled
        if outcome.parkable:
            self._parked[tenant] = Parked(head.job_id, rnd.aged(head), outcome)
        else:
            self._parked.pop(tenant, None)
        return False

    @staticmethod
    def _still_parked(parked: Parked, head_id: str, rnd: Round) -> bool:
        """The same head, promoted or not as it was, and its estimated start (if it had one)
        not yet passed: a running job that overran its learned run time would otherwise
        leave a stale "starts in N min" on screen until something is released."""
        eta = parked.outcome.reason.estimated_start
        return (
            parked.head == head_id
            and parked.aged == rnd.aged(rnd.jobs[head_id])
            and (eta is None or eta > rnd.view.now)
        )

    def _keep_facts(self) -> None:
        """Forget the jobs' facts when the nodes or tenants changed, and those of jobs no
        longer queued once they outnumber the queue (bounded, amortised)."""
        jobs = self._queues.jobs
        if self._state.rebuilt:
            self._facts = {}
        elif len(self._facts) > 2 * len(jobs) + 1024:
            self._facts = {j: f for j, f in self._facts.items() if jobs.get(j) is f.job}

    def _unpark_changed(self, now: float) -> None:
        if self._state.rebuilt:
            self._parked.clear()
            return
        released = self._state.released
        self._parked = {
            t: p
            for t, p in self._parked.items()
            if not (p.outcome.wake_on & released) and p.outcome.wake_at > now
        }
