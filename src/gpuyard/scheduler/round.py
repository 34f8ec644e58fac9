"""The work of one multi-tenant cycle: cursors over tenant queues, admissions, preemptions
(reclaim and LAS demotion, by heads and by backfill candidates), and the reasons of the jobs
that wait. See `multitenant.py`."""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from gpuyard.model import (
    OPPORTUNISTIC_BELOW,
    JobDemand,
    JobPlacement,
    QueuePolicy,
    RunningJob,
    Tenant,
)
from gpuyard.scheduler.cycle import CycleResult, CycleStats
from gpuyard.scheduler.explain import Deadline, capacity_reason, deadlines, with_estimate
from gpuyard.scheduler.fits import Shape, ShapeFits, matching_flavors, shape_of
from gpuyard.scheduler.limits import UserLimits, budget_refusal
from gpuyard.scheduler.order import Entry, is_aged
from gpuyard.scheduler.packing import place_gang
from gpuyard.scheduler.pending import PendingReasons
from gpuyard.scheduler.preempt import Demotion, candidates, demotion, find_victims, las_level
from gpuyard.scheduler.quota import CPU, MEMORY, QuotaVerdict, Usage, job_usage, quota_tenant
from gpuyard.scheduler.reasons import PendingCode, PendingReason
from gpuyard.scheduler.reservation import Reservation, delays, expected_end, reserve
from gpuyard.scheduler.state import ClusterState
from gpuyard.scheduler.victimtable import Row, VictimTable
from gpuyard.scheduler.view import Admission, ClusterView, Preemption, SchedulerConfig

ALL_WAKE = frozenset({CPU, MEMORY})
WAITS_FOR_CAPACITY = frozenset({PendingCode.INSUFFICIENT, PendingCode.FRAGMENTED})
MORE = "+more"  # the snapshot's key for tasks added to a running job (`charge_key`)


def charged_to(job: JobDemand) -> str:
    """The book entry `job` is charged to (`quota.quota_tenant`)."""
    return quota_tenant(job.tenant, job.opportunistic_class)


def charge_key(job: JobDemand) -> str:
    """Under which key the snapshot holds what `job` is admitted with: its id, or, for the
    remainder of a running job (which the snapshot holds under the id), a key of its own
    (the next view has the added tasks in the running job, and this key is refunded)."""
    return job.job_id + MORE if job.remainder else job.job_id


@dataclass(frozen=True, slots=True, init=False)
class Blocked:
    """A head that cannot start now; `parkable` when only a release in `wake_on`, or the
    time `wake_at` (a running job it could demote then crosses into a higher LAS queue), can
    help; `reservation`: the start time a promoted head reserved (EASY backfill, kept while
    it is parked); `settled`: a later cycle on the same queue and running jobs blocks it the
    same way (not so for a head waiting for its victims to stop: time changes who else may
    be stopped)."""

    reason: PendingReason
    parkable: bool
    wake_on: frozenset[str]
    settled: bool
    wake_at: float
    reservation: Reservation | None

    def __init__(
        self,
        reason: PendingReason,
        parkable: bool = False,
        wake_on: frozenset[str] = frozenset(),
        settled: bool = True,
        wake_at: float = math.inf,
        reservation: Reservation | None = None,
    ) -> None:  # by hand: compiled, it is built natively (docs/sim.md, Fast replays)
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "parkable", parkable)
        object.__setattr__(self, "wake_on", wake_on)
        object.__setattr__(self, "settled", settled)
        object.__setattr__(self, "wake_at", wake_at)
        object.__setattr__(self, "reservation", reservation)


@dataclass(frozen=True, slots=True)
class Facts:
    """What a queued job's admission needs that changes only with the nodes or tenants: the
    GPU flavors it can use, its GPUs, why it can never run (None: it can), its shape, whom
    it may demote (`Demotion`; None: nobody), and its quota usage per flavor as its tenant
    is charged (`QuotaBook.normalise`, filled as flavors are tried)."""

    job: JobDemand
    flavors: list[str | None]
    gpus: int
    never: PendingReason | None
    shape: Shape
    demote: Demotion | None
    usage: dict[str | None, Usage] = field(default_factory=dict)


class Round:
    def __init__(
        self,
        view: ClusterView,
        config: SchedulerConfig,
        state: ClusterState,
        jobs: Mapping[str, JobDemand],
        queues: Mapping[str, list[Entry]],
        fits: ShapeFits,
        facts: dict[str, Facts],
        victims: VictimTable,
        narrowest: Callable[[str], int],
    ) -> None:
        self.view, self.config, self.state, self.jobs = view, config, state, jobs
        self.queues, self.fits, self._facts, self._victims = queues, fits, facts, victims
        self._narrowest = narrowest  # tenant → the fewest GPUs its queued jobs need on a node
        self.cursor: dict[str, int] = {}
        self.reasons: dict[str, PendingReason] = {}
        self.blocked: dict[str, PendingReason] = {}  # tenant → why its whole queue waits
        self.first_blocked: dict[str, tuple[int, str]] = {}  # tenant → (cursor, head id)
        self.misfits: dict[tuple[str, Shape], PendingReason] = {}  # failed backfill shapes
        self.admitted: list[JobPlacement] = []
        self.admissions: list[Admission] = []
        self.preemptions: list[Preemption] = []
        self.users = UserLimits(view.tenants, view.running)
        self.set_aside = 0
        self._deadlines: list[Deadline] | None = None
        self._pool: list[Row] | None = None
        self.stopping: set[str] = set()  # jobs preempted in this cycle
        self.wake_at = math.inf  # a demotion that failed now might succeed from then on
        self._crossing: float | None = None
        self.reservation: Reservation | None = None  # of the first promoted head blocked
        # resource key → a job (not opportunistic) that waits for it to be free: no
        # `opportunistic` job starts on it in this cycle (it runs on idle capacity only)
        self.wanted: dict[str, str] = {}
        self._opportunistic_running: bool | None = None

    # ---- heads -------------------------------------------------------------------------

    def head(self, tenant: str) -> JobDemand:
        return self.jobs[self.queues[tenant][self.cursor[tenant]][1]]

    def aged(self, job: JobDemand) -> bool:
        return is_aged(job, self.view.now, self.config)

    def advance(self, tenant: str) -> bool:
        """Move to the tenant's next job that may be considered now; False when none is."""
        budget = budget_refusal(tenant, self.view.tenants, self.view.usage)
        if budget is not None:
            self.blocked[tenant] = budget
            return False
        queue = self.queues[tenant]
        i = self.cursor.get(tenant, -1) + 1
        while i < len(queue):
            job = self.jobs[queue[i][1]]
            reason = self.facts(job).never or self.users.refusal(job)
            if reason is None:
                self.cursor[tenant] = i
                return True
            self.reasons[job.job_id] = reason
            self.set_aside += 1
            i += 1
        self.cursor[tenant] = i
        return False

    def next_head(self, tenant: str) -> bool:
        """After the tenant's head was tried: its next job, or, once a head is blocked, the
        next job that may backfill behind it (`tenant_backfill`, promoted head or not);
        False when none is, or when no node has the GPUs free that the narrowest of its
        queued jobs needs (the jobs not looked at then wait behind the head, as those past
        the window do)."""
        if tenant not in self.first_blocked:
            return self.advance(tenant)
        at = self.first_blocked[tenant][0]
        if not self.config.tenant_backfill:
            return False
        if self._narrowest(tenant) > self.state.snapshot.largest_hole():
            return False
        while self.advance(tenant) and self.cursor[tenant] - at <= self.config.backfill_window:
            job = self.head(tenant)
            misfit = self.misfits.get((tenant, self.facts(job).shape)) if job.gang else None
            if misfit is None:
                return True
            self.reasons[job.job_id] = misfit
        return False

    def backfilling(self, tenant: str) -> bool:
        return tenant in self.first_blocked

    def facts(self, job: JobDemand) -> Facts:
        """The job's `Facts`, worked out once per queued demand (the scheduler keeps them
        across cycles and forgets them when the nodes or tenants change)."""
        known = self._facts.get(job.job_id)
        if known is not None and known.job is job:
            return known
        flavors = matching_flavors(job, self.state.snapshot.flavors)
        gpus = job.total.gpus
        never = self.fits.never(job) or self._never_by_quota(job, flavors, gpus)
        demote = self._demotion(job)
        known = self._facts[job.job_id] = Facts(job, flavors, gpus, never, shape_of(job), demote)
        return known

    def usage(self, job: JobDemand, flavor: str | None) -> Usage:
        """What admitting `job` on `flavor` charges its tenant (worked out once per flavor)."""
        facts = self.facts(job)
        known = facts.usage.get(flavor)
        if known is None:
            known = facts.usage[flavor] = self.state.book.normalise(
                charged_to(job), job_usage(job, flavor)
            )
        return known

    def _never_by_quota(
        self, job: JobDemand, flavors: list[str | None], gpus: int
    ) -> PendingReason | None:
        book = self.state.book
        if not job.gang:  # it needs room for one task at a time
            gpus = max(t.resources.gpus for t in job.tasks)
        if not gpus or not book.enabled:
            return None
        caps = [book.max_allowed(charged_to(job), f) for f in flavors if f is not None]
        limits = [c for c in caps if c is not None]
        if not caps or len(limits) < len(caps) or any(gpus <= c for c in limits):
            return None
        return PendingReason(
            PendingCode.BORROWING_LIMIT,
            f"needs {gpus} GPUs; tenant {job.tenant} may never use more than {max(limits)} "
            f"(its guarantee plus its borrowing limit)",
        )

    def order_key(self, tenant: str) -> tuple:
        """Heads that fit their tenant's guarantee before heads that would borrow (as Kueue
        orders its entries), so a lender's job is admitted before a borrower can take its
        quota again; then, with `least_served_first`, the head's LAS queue (Tiresias: capacity
        goes to the least-served job first, whichever its tenant; a promoted head counts as
        the first queue); then weighted dominant share, age. Never priority: it is a
        tenant's own (tests/security/test_priority_shield.py). Heads of the
        `opportunistic` class after all others: they take only what nobody else waits for."""
        head = self.head(tenant)
        borrows = not any(self._within(head, f) for f in self._candidate_flavors(head))
        served = (
            las_level(self.config.las_thresholds_gpu_s, head.attained_gpu_s)
            if self.config.least_served_first and not self.aged(head)
            else 0
        )
        share = self.state.book.share_key(tenant)
        last = head.opportunistic_class
        return (last, borrows, served, share, head.submitted_at, head.seq, tenant)

    def _candidate_flavors(self, job: JobDemand) -> list[str | None]:
        return self.facts(job).flavors

    def _within(self, job: JobDemand, flavor: str | None) -> bool:
        if job.opportunistic_class:
            return False  # never within its tenant's guarantee
        if not flavor:
            return True
        book = self.state.book
        g = book.guarantee(job.tenant, flavor)
        return g is None or book.usage(job.tenant, flavor) + self.facts(job).gpus <= g

    def _flavors(self, job: JobDemand) -> list[str | None]:
        flavors = self._candidate_flavors(job)
        if len(flavors) < 2:
            return flavors
        return sorted(flavors, key=lambda f: (not self._within(job, f), f or ""))

    # ---- admit -------------------------------------------------------------------------

    def try_admit(self, tenant: str, head: JobDemand) -> JobPlacement | Blocked:
        """Start `head` if quota and placement allow; else reclaim or wait. A backfill
        candidate (behind a blocked head) starts if it fits now, or makes room by demoting
        jobs it may demote (as Tiresias lets any job of a lower LAS queue do); it never
        blocks its tenant."""
        refusals: list[tuple[str | None, QuotaVerdict]] = []
        physical: list[tuple[str | None, QuotaVerdict]] = []
        for flavor in self._flavors(head):
            if head.opportunistic_class and self._wanted_by(flavor) is not None:
                refusals.append((flavor, self._idle_only(flavor)))
                continue
            verdict = self.state.book.verdict_normalised(
                charged_to(head), self.usage(head, flavor), self.state.free
            )
            if verdict.blocked:
                refusals.append((flavor, verdict))
                continue
            placement = place_gang(self.state.snapshot, head, flavor)
            if placement is not None and self._delays_reserved(head, placement):
                return self._refused_for_reservation(tenant, head)
            if placement is not None:
                self._admit(head, placement, verdict)
                return placement
            physical.append((flavor, verdict))
        if not head.gang:
            part = self._admit_part(head)
            if part is not None:
                return part
        if self.backfilling(tenant):
            if self._demotes(head):
                made_room = self._reclaim(head, physical)
                if made_room is not None:
                    self.reasons[head.job_id] = made_room.reason
                    return made_room
                self.wake_at = min(self.wake_at, self.next_crossing())
            reason = self._misfit(head, refusals, physical)
            if physical:
                self._want(head, reason, frozenset(f or CPU for f, _ in physical))
            if not head.opportunistic_class and head.gang:  # (idle capacity only; a part)
                self.misfits[(tenant, self.facts(head).shape)] = reason
            self.reasons[head.job_id] = reason
            return Blocked(reason)
        outcome = self._reclaim(head, physical) or self._wait(head, refusals, physical)
        return self.block(tenant, outcome)

    def block(self, tenant: str, outcome: Blocked | PendingReason) -> Blocked:
        blocked = outcome if isinstance(outcome, Blocked) else Blocked(outcome)
        head = self.head(tenant)
        self._want(head, blocked.reason, blocked.wake_on)
        head_id = head.job_id
        self.blocked.setdefault(tenant, blocked.reason)
        self.first_blocked.setdefault(tenant, (self.cursor[tenant], head_id))
        self.reasons[head_id] = blocked.reason
        return blocked

    def reinstate(self, outcome: Blocked) -> None:
        """A parked promoted head keeps the start time it reserved when it was tried."""
        if self.reservation is None and outcome.reservation is not None:
            self.reservation = outcome.reservation

    def _delays_reserved(self, job: JobDemand, placement: JobPlacement) -> bool:
        r = self.reservation
        return (
            r is not None
            and r.job.job_id != job.job_id
            and delays(
                self.state,
                self._by_deadline(),
                r,
                job,
                placement,
                self.view.now,
                self.config.eta_max_releases,
            )
        )

    def _refused_for_reservation(self, tenant: str, job: JobDemand) -> Blocked:
        assert self.reservation is not None
        self.wake_at = self.view.now  # read with the clock: no quiet cycle after this one
        refused = Blocked(self.reservation.refusal(self.view.now), settled=False)
        if self.backfilling(tenant):
            self.reasons[job.job_id] = refused.reason
            return refused
        return self.block(tenant, refused)

    def _admit(self, job: JobDemand, placement: JobPlacement, verdict: QuotaVerdict) -> None:
        end = expected_end(job, self.view.now)
        if self.reservation is not None and end is not None:  # later checks see it end
            bisect.insort(self._by_deadline(), (end, job.job_id, job.max_runtime_s is None))
        self.state.charge(charge_key(job), charged_to(job), placement.tasks)
        self.users.admitted(job)
        self.admitted.append(placement)
        self.admissions.append(Admission(job.job_id, job.tenant, verdict.borrowed))

    def _admit_part(self, head: JobDemand) -> JobPlacement | None:
        """A job without gang allocation whose tasks do not all fit now: its first tasks (in
        rank order), as many as quota, placement and its owner's GPU limit allow and at least
        one, start; the others wait as the job's remainder."""
        for flavor in self._flavors(head):
            if head.opportunistic_class and self._wanted_by(flavor) is not None:
                continue
            found = self._most_tasks(head, flavor)
            if found is not None and not self._delays_reserved(found[0], found[1]):
                self._admit(found[0], found[1], found[2])
                return found[1]
        return None

    def _most_tasks(
        self, job: JobDemand, flavor: str | None
    ) -> tuple[JobDemand, JobPlacement, QuotaVerdict] | None:
        """The most first tasks of `job` that may start now on `flavor` (a binary search over
        their number: fewer tasks never need more room), with their placement and verdict."""
        room = self.users.gpu_room(job)
        book, snapshot = self.state.book, self.state.snapshot

        def trial(k: int) -> tuple[JobDemand, JobPlacement, QuotaVerdict] | None:
            part = job.with_tasks(job.tasks[:k])
            if room is not None and part.total.gpus > room:
                return None
            usage = book.normalise(charged_to(part), job_usage(part, flavor))
            verdict = book.verdict_normalised(charged_to(part), usage, self.state.free)
            if verdict.blocked:
                return None
            placement = place_gang(snapshot, part, flavor)
            return None if placement is None else (part, placement, verdict)

        best = trial(1)
        lo, hi = 1, len(job.tasks) - 1
        while best is not None and lo < hi:
            mid = (lo + hi + 1) // 2
            found = trial(mid)
            if found is None:
                hi = mid - 1
            else:
                best, lo = found, mid
        return best

    # ---- reclaim and priority preemption -------------------------------------------------

    def _reclaim(
        self, head: JobDemand, physical: list[tuple[str | None, QuotaVerdict]]
    ) -> Blocked | None:
        if head.opportunistic_class or head.remainder:
            return None  # it runs on idle capacity only / a running job's rest: stops nobody
        own = self.view.tenants.get(head.tenant)
        demotable = self._demotion_now(head)
        may = (own is not None and own.priority_preemption) or self._opportunistic_runs()
        for flavor, verdict in physical:
            reclaim = self.state.book.enabled and not verdict.opportunistic
            if not (reclaim or demotable or may):
                continue  # nothing it may preempt (`candidates` would find none)
            pool = [
                r
                for r in candidates(
                    head,
                    self._preemptible(),
                    self.view.tenants,
                    reclaim,
                    self.view.now,
                    demotable,
                    self.stopping,
                    self.state.book,
                )
                if self._holds(r, flavor)
            ]
            if not pool:
                continue
            fits = self._fits(head, flavor, reclaim)
            found = find_victims(self.state, head, flavor, pool, fits, self.stopping)
            if found is not None:
                return self._preempt(head, flavor, reclaim, *found)
        return None

    def _las_demotes(self, tenant: str) -> bool:
        t = self.view.tenants.get(tenant)
        return t is not None and las_demotes(t, self.config)

    def _demotion(self, head: JobDemand) -> Demotion | None:
        c = self.config
        if not c.tenant_preemption:
            return None
        own = self._las_demotes(head.tenant)
        demote = demotion(head, c.las_thresholds_gpu_s, own)
        # a head in the last LAS queue demotes nobody: no job is in a higher one
        return demote if demote.level < len(demote.thresholds) else None

    def _demotion_now(self, head: JobDemand) -> Demotion | None:
        """Whom `head` may demote now: by its LAS queue, or, once promoted (waited past its
        `wait_limit`), as a job of the first queue (Tiresias' promotion)."""
        known = self.facts(head).demote
        c = self.config
        if not c.tenant_preemption or (known is not None and not known.level):
            return known
        if not self.aged(head):
            return known
        return demotion(head, c.las_thresholds_gpu_s, self._las_demotes(head.tenant), True)

    def _demotes(self, job: JobDemand) -> bool:
        return self._demotion_now(job) is not None

    def next_crossing(self) -> float:
        """The first time after now that a running job a head may demote moves into a higher
        LAS queue (inf: none will): until then, a demotion that failed fails again (worked
        out once per cycle, over every job of the victim table: a lower bound for any head)."""
        if self._crossing is None:
            th, now, first = self.config.las_thresholds_gpu_s, self.view.now, math.inf
            for row in self._preemptible():
                gpus, started, attained = row[6], row[5], row[7]
                if row[4] or not gpus:
                    continue
                i = bisect.bisect_right(th, attained + gpus * max(0.0, now - started))
                if i < len(th):
                    first = min(first, started + (th[i] - attained) / gpus)
            self._crossing = first
        return self._crossing

    def _preemptible(self) -> list[Row]:
        """Running jobs that some head might preempt: borrowers, stopping jobs, and every job
        of the tenants in `own_jobs_preemptible` (`VictimTable`, read once per cycle)."""
        if self._pool is None:
            self._pool = self._victims.rows()
        return self._pool

    def _opportunistic_runs(self) -> bool:
        """Whether any `opportunistic` job runs that a head might stop (once per cycle)."""
        if self._opportunistic_running is None:
            self._opportunistic_running = any(
                row[2] < OPPORTUNISTIC_BELOW for row in self._preemptible()
            )
        return self._opportunistic_running

    # ---- idle capacity for opportunistic jobs -------------------------------------------

    def _want(self, job: JobDemand, reason: PendingReason, keys: frozenset[str]) -> None:
        """A job that waits for capacity (not an opportunistic one) wants `keys`."""
        if job.opportunistic_class or reason.code not in WAITS_FOR_CAPACITY:
            return
        for key in keys:
            self.wanted.setdefault(key, job.job_id)

    def _wanted_by(self, flavor: str | None) -> str | None:
        return self.wanted.get(flavor or CPU)

    def _idle_only(self, flavor: str | None) -> QuotaVerdict:
        job_id = self._wanted_by(flavor)
        what = f"{flavor} GPUs" if flavor else "CPU"
        return QuotaVerdict(
            blocked=PendingCode.INSUFFICIENT,
            message=(
                f"opportunistic: runs on idle capacity only, and job {job_id} waits for "
                f"{what}"
            ),
        )

    def _holds(self, r: RunningJob, flavor: str | None) -> bool:
        charged = self.state.charged.get(r.job_id)
        return charged is not None and (flavor is None or charged.usage.get(flavor, 0) > 0)

    def _fits(self, head: JobDemand, flavor: str | None, within: bool):
        usage, gpus = self.usage(head, flavor), head.total.gpus

        def fits() -> JobPlacement | None:
            if flavor and self.state.free(flavor) < gpus:
                return None
            verdict = self.state.book.verdict_normalised(head.tenant, usage, self.state.free)
            if verdict.blocked or (within and verdict.opportunistic):
                return None
            return place_gang(self.state.snapshot, head, flavor)

        return fits

    def _preempt(
        self,
        head: JobDemand,
        flavor: str | None,
        reclaim: bool,
        victims: list[RunningJob],
        placement: JobPlacement,
    ) -> Blocked:
        # hold the room for it; the victims keep their GPUs until they stop (the snapshot
        # counts both holders), so nobody else gets any of them in this cycle
        self.state.charge(head.job_id, head.tenant, placement.tasks)
        graces = [self._grace(v) for v in victims]
        for v in victims:
            if not v.terminating and v.job_id not in self.stopping:
                self.stopping.add(v.job_id)
                self.preemptions.append(
                    Preemption(
                        v.job_id,
                        self._why_preempted(head, v, flavor, reclaim),
                        head.job_id,
                        self._grace(v),
                    )
                )
        names = ", ".join(f"{v.job_id} of tenant {v.tenant}" for v in victims)
        reason = PendingReason(
            PendingCode.WAITING_FOR_PREEMPTION,
            f"waiting for {len(victims)} preempted job{'s' if len(victims) > 1 else ''} to stop "
            f"({names}); it starts once they have, within {max(graces)} s",
            estimated_start=self.view.now + max(graces),
        )
        return Blocked(reason, settled=False)

    def _grace(self, r: RunningJob) -> int:
        t = self.view.tenants.get(r.tenant) or Tenant(r.tenant)
        return t.preemption_grace_s

    @staticmethod
    def _why_preempted(
        head: JobDemand, victim: RunningJob, flavor: str | None, reclaim: bool
    ) -> str:
        if victim.opportunistic_class:
            return (
                f"preempted: an opportunistic job runs on idle capacity only, and job "
                f"{head.job_id} of tenant {head.tenant} needs it"
            )
        if victim.tenant == head.tenant and victim.priority_class != head.priority_class:
            return (
                f"preempted for job {head.job_id} of a higher priority class "
                f"({head.priority_class} > {victim.priority_class}) in tenant {head.tenant}"
            )
        if victim.tenant == head.tenant and victim.priority < head.priority:
            return (
                f"preempted for job {head.job_id} of higher priority ({head.priority} > "
                f"{victim.priority}) in tenant {head.tenant}"
            )
        if victim.tenant == head.tenant or not reclaim:
            return (
                f"preempted for job {head.job_id} of tenant {head.tenant}, which has received "
                f"less GPU service (LAS demotion)"
            )
        what = f"{flavor} GPUs" if flavor else "CPU and memory"
        return (
            f"preempted: tenant {head.tenant} reclaims {what} guaranteed to it, for job "
            f"{head.job_id}; tenant {victim.tenant} was borrowing them"
        )

    # ---- wait --------------------------------------------------------------------------

    def _wait(
        self,
        head: JobDemand,
        refusals: list[tuple[str | None, QuotaVerdict]],
        physical: list[tuple[str | None, QuotaVerdict]],
    ) -> Blocked:
        if not physical:
            flavor, verdict = refusals[0]
            reason = PendingReason(verdict.blocked or PendingCode.QUOTA_EXCEEDED, verdict.message)
            if any(v.blocked is PendingCode.INSUFFICIENT for _, v in refusals):
                # an opportunistic job: the job that wants the capacity may start or leave
                # the queue without a release, so it is tried again each cycle
                return Blocked(reason)
            wake = frozenset({flavor}) if flavor else ALL_WAKE
            return Blocked(reason, parkable=True, wake_on=wake)
        flavor = physical[0][0]
        flavors = frozenset(f for f, _ in physical if f)
        reason = capacity_reason(self.state, head, flavor, self.config.explain)
        if self.config.explain:
            reason = self._with_estimate(reason, head, flavor)
        gpus_short = flavor is not None and self.state.free(flavor) < head.total.gpus
        wake = flavors | (frozenset() if gpus_short else ALL_WAKE)
        wake_at = self.next_crossing() if self._demotes(head) else math.inf
        self.wake_at = min(self.wake_at, wake_at)
        if self.reservation is None and self.aged(head):
            self.reservation = reserve(
                self.state,
                self._by_deadline(),
                head,
                flavor,
                self.view.now,
                self.config.eta_max_releases,
            )
        held = self.reservation if self.reservation and self.reservation.job is head else None
        return Blocked(reason, parkable=True, wake_on=wake, wake_at=wake_at, reservation=held)

    def _misfit(
        self,
        job: JobDemand,
        refusals: list[tuple[str | None, QuotaVerdict]],
        physical: list[tuple[str | None, QuotaVerdict]],
    ) -> PendingReason:
        """Why a backfill candidate cannot start now (no estimate: it is not the head)."""
        if physical:
            return capacity_reason(self.state, job, physical[0][0], self.config.explain)
        verdict = refusals[0][1]
        return PendingReason(verdict.blocked or PendingCode.QUOTA_EXCEEDED, verdict.message)

    def _with_estimate(
        self, reason: PendingReason, head: JobDemand, flavor: str | None
    ) -> PendingReason:
        return with_estimate(
            reason,
            self.state,
            self._by_deadline(),
            head,
            flavor,
            self.view.now,
            self.config.eta_max_releases,
        )

    def _by_deadline(self) -> list[Deadline]:
        if self._deadlines is None:
            self._deadlines = deadlines(list(self.view.running))
        return self._deadlines

    # ---- requeue -----------------------------------------------------------------------

    def result(self, stats: CycleStats) -> CycleResult:
        admitted = {p.job_id for p in self.admitted}
        heads = {
            tenant: self.first_blocked[tenant][1]
            if tenant in self.first_blocked
            else self._head_id(tenant)
            for tenant in self.blocked
        }
        reasons = PendingReasons(
            self.queues, self.jobs, admitted, self.reasons, self.blocked, heads
        )
        return CycleResult(
            tuple(self.admitted), tuple(self.preemptions), reasons, stats, tuple(self.admissions)
        )

    def _head_id(self, tenant: str) -> str | None:
        i = self.cursor.get(tenant)
        queue = self.queues[tenant]
        if i is None or i >= len(queue):
            return None
        return queue[i][1]


def las_demotes(tenant: Tenant, config: SchedulerConfig) -> bool:
    """Whether `tenant`'s heads may demote its own jobs (LAS inside the tenant)."""
    return config.tenant_preemption and tenant.queue_policy is QueuePolicy.LAS


def own_jobs_preemptible(tenants: Mapping[str, Tenant], config: SchedulerConfig) -> frozenset[str]:
    """The tenants whose own running jobs their heads may stop: priority preemption, or LAS
    demotion inside the tenant."""
    return frozenset(
        name for name, t in tenants.items() if t.priority_preemption or las_demotes(t, config)
    )
