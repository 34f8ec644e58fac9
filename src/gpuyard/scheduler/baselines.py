"""Baseline policies from the literature, selectable with `SchedulerConfig(policy=...)`.

Each is a `cycle(view) -> CycleResult` like the default multi-tenant scheduler, on the same
synced snapshot (`ClusterState`) and the same gang placement (`place_gang`):

- `fifo-quota`    per-tenant FIFO within the guarantee on shared nodes: each tenant's queue in
                  FIFO order, strictly (a head that cannot start blocks its tenant), within
                  its guarantee only (no borrowing); `fifo` is its old name, still accepted.
                  (YARN-CS proper, each tenant on private nodes of its quota, is the
                  simulator's `fifo-private`: sim/private.py);
- `fifo-backfill` one FIFO queue on the shared pool (quotas ignored); a job that does not fit
                  is skipped and later ones that fit start (greedy backfill);
- `sjf-oracle`    shortest job first on the shared pool (`JobDemand.oracle_duration_s`),
                  greedy, non-preemptive; simulation only;
- `srtf-oracle`   shortest remaining time first, preemptive: a job that does not fit stops
                  running jobs with a longer remaining time (`RunningJob.oracle_end_at`);
- `las`           Tiresias' discretized 2D-LAS on the shared pool: queues by attained
                  GPU-seconds (`las_thresholds_gpu_s`), FIFO (arrival) inside a queue; a job
                  that does not fit stops running jobs of lower queues.

Victims get their tenant's `preemption_grace_s`; the head's room is held for the rest of the
cycle, and it starts in a later cycle once they have stopped (as with reclaim).
"""

from __future__ import annotations

import bisect
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Sized

from gpuyard.model import JobDemand, JobPlacement, RunningJob, Tenant
from gpuyard.scheduler.cycle import CycleResult, CycleStats
from gpuyard.scheduler.fits import matching_flavors
from gpuyard.scheduler.laspool import LevelPool
from gpuyard.scheduler.mirror import Numbering, QueueMirror
from gpuyard.scheduler.order import widest_task
from gpuyard.scheduler.packing import place_gang
from gpuyard.scheduler.preempt import find_victims
from gpuyard.scheduler.quota import job_usage
from gpuyard.scheduler.reasons import PendingCode, PendingReason
from gpuyard.scheduler.remaining import RemainingPool
from gpuyard.scheduler.state import ClusterState
from gpuyard.scheduler.view import (
    Admission,
    ClusterView,
    Preemption,
    SchedulerConfig,
    ViewChanges,
)

NOT_NOW = PendingReason(PendingCode.INSUFFICIENT, "not enough GPUs free for it now")
BEHIND = PendingReason(PendingCode.BEHIND, "waiting for the job ahead of it in the queue")
NO_BORROW = PendingReason(
    PendingCode.QUOTA_EXCEEDED, "its tenant's guarantee is in use (this policy never borrows)"
)
NEVER_IN_QUOTA = PendingReason(
    PendingCode.BORROWING_LIMIT, "needs more GPUs than its tenant's guarantee (never borrows)"
)


class Pass:
    """One cycle's admissions and preemptions on the synced state."""

    def __init__(
        self,
        view: ClusterView,
        state: ClusterState,
        flavors_of: Callable[[JobDemand], list[str | None]],
    ) -> None:
        self.view, self.state, self.flavors_of = view, state, flavors_of
        self.admit: list[JobPlacement] = []
        self.admissions: list[Admission] = []
        self.preempt: list[Preemption] = []
        self.reasons: dict[str, PendingReason] = {}
        self.stopping: set[str] = set()
        self.failed_task = 1 << 30  # smallest task GPU count that failed since the last free

    def place(self, job: JobDemand, biggest: int) -> JobPlacement | None:
        """Place `job` (whose biggest task has `biggest` GPUs) on the first flavor it fits."""
        if biggest >= self.failed_task:
            return None
        for flavor in self.flavors_of(job):
            if flavor is not None and self.state.free(flavor) < job.total.gpus:
                continue
            placement = place_gang(self.state.snapshot, job, flavor)
            if placement is not None:
                return placement
        self._failed(job)
        return None

    def _failed(self, job: JobDemand) -> None:
        """Remember that a one-task job of this size did not fit (until something is freed)."""
        if len(job.tasks) == 1:
            self.failed_task = min(self.failed_task, widest_task(job))

    def start(self, job: JobDemand, placement: JobPlacement, borrowed=()) -> None:
        self.state.charge(job.job_id, job.tenant, placement.tasks)
        self.admit.append(placement)
        self.admissions.append(Admission(job.job_id, job.tenant, tuple(borrowed)))

    def try_preempt(
        self, job: JobDemand, pool: list[RunningJob], why: Callable[[RunningJob], str]
    ) -> bool:
        """Stop the fewest of `pool` that make room for `job` (`find_victims`: its order,
        then each victim kept whose stop is not needed) and hold the room."""
        self.failed_task = 1 << 30  # what-if removals: forget what did not fit
        live = [r for r in pool if r.job_id not in self.stopping]
        for flavor in self.flavors_of(job):
            found = find_victims(self.state, job, flavor, live, self._fits(job, flavor))
            if found is not None:
                break
        else:
            return False
        victims, placement = found
        self.state.charge(job.job_id, job.tenant, placement.tasks)  # held: nobody else gets it
        for r in victims:
            self.stopping.add(r.job_id)
            if not r.terminating:
                self.preempt.append(Preemption(r.job_id, why(r), job.job_id, self._grace(r)))
        self.reasons[job.job_id] = PendingReason(
            PendingCode.WAITING_FOR_PREEMPTION,
            f"waiting for {len(victims)} preempted job(s) to stop",
        )
        return True

    def _fits(self, job: JobDemand, flavor: str | None) -> Callable[[], JobPlacement | None]:
        def fits() -> JobPlacement | None:
            if flavor is not None and self.state.free(flavor) < job.total.gpus:
                return None
            return place_gang(self.state.snapshot, job, flavor)

        return fits

    def _grace(self, r: RunningJob) -> int:
        return (self.view.tenants.get(r.tenant) or Tenant(r.tenant)).preemption_grace_s

    def result(self) -> CycleResult:
        stats = CycleStats(len(self.view.queued), len(self.admit), 0)
        return CycleResult(
            tuple(self.admit), tuple(self.preempt), self.reasons, stats, tuple(self.admissions)
        )


class SortedQueues:
    """Queued jobs in `key` order per group, kept sorted across cycles by diff (`QueueMirror`:
    the view's changes, or job identity)."""

    def __init__(self, key: Callable[[JobDemand], tuple], group: Callable[[JobDemand], str]):
        self.key, self.group = key, group
        self.queues: dict[str, list[tuple]] = {}
        self._mirror = QueueMirror()
        self._entry: dict[int, tuple] = {}  # id(job) → its entry

    @property
    def jobs(self) -> dict[str, JobDemand]:
        return self._mirror.jobs

    def sync(self, queued: Collection[JobDemand], changes: ViewChanges | None) -> None:
        gone, added = self._mirror.sync(queued, changes)
        for job in gone:
            self._remove(job)
        for job in added:
            self._insert(job)

    def _insert(self, job: JobDemand) -> None:
        entry = (*self.key(job), job.job_id, job.total.gpus, widest_task(job))
        self._entry[id(job)] = entry
        bisect.insort(self.queues.setdefault(self.group(job), []), entry)

    def _remove(self, job: JobDemand) -> None:
        entry = self._entry.pop(id(job))
        queue = self.queues[self.group(job)]
        del queue[bisect.bisect_left(queue, entry)]


class Baseline(ABC):
    """Common frame: sync the state and the queues, run the policy's pass."""

    uses_quotas = False

    def __init__(self, config: SchedulerConfig) -> None:
        self.config = config
        self._state = ClusterState()
        self._queues = SortedQueues(self.key, self.group)
        self._numbering = Numbering()
        self._flavors: dict[str, tuple[JobDemand, list[str | None]]] = {}

    def key(self, job: JobDemand) -> tuple:
        return (job.seq,)

    def group(self, job: JobDemand) -> str:
        return ""

    def cycle(self, view: ClusterView) -> CycleResult:
        tenants = view.tenants if self.uses_quotas else {}
        changes = self._numbering.follow(view)
        self._state.sync(view.nodes, tenants, view.running, changes)
        self._queues.sync(view.queued, changes)
        self.sync_running(view, changes)
        if self._state.rebuilt or len(self._flavors) > 2 * len(view.queued) + 1024:
            self._flavors = {}
        p = Pass(view, self._state, self._flavors_of)
        self.run(view, p)
        return p.result()

    def _flavors_of(self, job: JobDemand) -> list[str | None]:
        """The GPU flavors `job` can use, worked out once per queued demand (forgotten when
        the nodes change, or once they outnumber the queue)."""
        known = self._flavors.get(job.job_id)
        if known is None or known[0] is not job:
            flavors = matching_flavors(job, self._state.snapshot.flavors)
            known = self._flavors[job.job_id] = (job, flavors)
        return known[1]

    def sync_running(self, view: ClusterView, changes: ViewChanges | None) -> None:
        """Keep what the policy derives from the running jobs across cycles (none here)."""
        return

    def quiet_until(self, view: ClusterView) -> float:
        """After a cycle on `view` that admitted and preempted nothing: until when a cycle on
        the same queue and running jobs (only `now` later) decides nothing either. Here
        nothing depends on the time: a job that did not fit still does not fit."""
        return math.inf

    @abstractmethod
    def run(self, view: ClusterView, p: Pass) -> None:
        """Admit what the policy admits this cycle, recording it on `p`."""


class FifoCapacity(Baseline):
    """Per tenant, strictly in arrival order, within the tenant's guarantee only."""

    uses_quotas = True

    def __init__(self, config: SchedulerConfig) -> None:
        super().__init__(config)
        self._never: dict[str, bool] = {}
        self._parked: dict[str, tuple[str, PendingReason]] = {}  # tenant → blocked head

    def group(self, job: JobDemand) -> str:
        return job.tenant

    def run(self, view: ClusterView, p: Pass) -> None:
        """Each tenant's queue in order until its head cannot start. A head that could not
        start in the last cycle is not tried again while nothing was released since (its
        tenant's usage and the free capacity can only have shrunk): parked, as Kueue does."""
        book, jobs = self._state.book, self._queues.jobs
        if self._state.released or self._state.rebuilt:
            self._parked = {}
        for tenant, queue in self._queues.queues.items():
            for entry in queue:
                job = jobs[entry[-3]]
                if self._set_aside(p, book, job):
                    continue
                parked = self._parked.get(tenant)
                if parked is not None and parked[0] == job.job_id:
                    p.reasons[job.job_id] = parked[1]
                    break
                reason = self._admit(p, book, job)
                if reason is not None:
                    p.reasons[job.job_id] = reason
                    self._parked[tenant] = (job.job_id, reason)
                    break

    def _set_aside(self, p: Pass, book, job: JobDemand) -> bool:
        """Bigger than its tenant's guarantee: set aside, it does not block the queue."""
        never = self._never.get(job.job_id)
        if never is None:
            flavors = [f for f in p.flavors_of(job) if f]
            never = bool(flavors) and all(
                job.total.gpus > (book.guarantee(job.tenant, f) or 0) for f in flavors
            )
            self._never[job.job_id] = never
        if never:
            p.reasons[job.job_id] = NEVER_IN_QUOTA
        return never

    @staticmethod
    def _admit(p: Pass, book, job: JobDemand) -> PendingReason | None:
        for flavor in p.flavors_of(job):
            verdict = book.verdict(job.tenant, job_usage(job, flavor), p.state.free)
            if verdict.blocked or verdict.opportunistic:
                continue
            placement = place_gang(p.state.snapshot, job, flavor)
            if placement is not None:
                p.start(job, placement)
                return None
            return NOT_NOW
        return NO_BORROW


class Greedy(Baseline):
    """Jobs in `key` order on the shared pool; each starts if it fits, else it may make room
    (preemptive policies), else it is skipped and later jobs may start (backfill)."""

    preemptive = False
    _stopping: list[RunningJob] | None = None

    def run(self, view: ClusterView, p: Pass) -> None:
        jobs = self._queues.jobs
        self._stopping = None  # computed when a head first needs victims
        pool: Sized | None = None if self.preemptive else []
        no_room = 1 << 30  # smallest task size that could not make room this cycle
        for entry in self._queues.queues.get("", ()):
            biggest = entry[-1]
            no_victims = pool is not None and not pool
            if biggest >= p.failed_task and (no_victims or biggest >= no_room):
                if (no_room <= 1 or no_victims) and p.failed_task <= 1:
                    break
                continue
            job = jobs[entry[-3]]
            placement = p.place(job, biggest)
            if placement is not None:
                p.start(job, placement)
                continue
            if pool is None:
                pool = self.pool(view)
            if pool and biggest < no_room and self.make_room(view, p, job, pool):
                continue
            no_room = min(no_room, biggest)

    def pool(self, view: ClusterView) -> Sized:
        """Who may be stopped this cycle, in the policy's order (computed once, when a job
        first does not fit)."""
        return []

    def make_room(self, view: ClusterView, p: Pass, job: JobDemand, pool) -> bool:
        return False

    def stopping(self, view: ClusterView) -> list[RunningJob]:
        """Jobs already stopping (preempted in an earlier cycle): the first victims of any
        head, as in `default`, since their GPUs come back anyway — a head whose victims are
        still in their grace period takes them again instead of stopping more jobs."""
        if self._stopping is None:
            self._stopping = [r for r in view.running if r.terminating]
        return self._stopping


class Sjf(Greedy):
    def key(self, job: JobDemand) -> tuple:
        return (_oracle(job), job.seq)


class Srtf(Sjf):
    preemptive = True

    def __init__(self, config: SchedulerConfig) -> None:
        super().__init__(config)
        self._remaining = RemainingPool()

    def sync_running(self, view: ClusterView, changes: ViewChanges | None) -> None:
        self._remaining.sync(view.running, changes, view.now)

    def pool(self, view: ClusterView) -> RemainingPool:
        return self._remaining

    def make_room(self, view: ClusterView, p: Pass, job: JobDemand, pool) -> bool:
        victims = self.stopping(view) + pool.longer_than(_oracle(job), view.now)
        return bool(victims) and p.try_preempt(
            job, victims, lambda r: f"preempted for {job.job_id}, a job with less time left"
        )


class Las(Greedy):
    preemptive = True

    def __init__(self, config: SchedulerConfig) -> None:
        super().__init__(config)
        self._levels = LevelPool(config.las_thresholds_gpu_s)

    def key(self, job: JobDemand) -> tuple:
        return (self._queue(job.attained_gpu_s), job.seq)

    def _queue(self, attained: float) -> int:
        return bisect.bisect_right(self.config.las_thresholds_gpu_s, attained)

    def sync_running(self, view: ClusterView, changes: ViewChanges | None) -> None:
        self._levels.sync(view.running, changes, view.now)

    def pool(self, view: ClusterView) -> list[RunningJob]:
        """Running jobs above the lowest queue, highest queue first, newest first there (a
        job of the lowest queue is never a victim); kept across cycles (`LevelPool`)."""
        return self._levels.victims(view.now)

    def quiet_until(self, view: ClusterView) -> float:
        """The next time a possible victim moves up a queue (it may then be stopped for a job
        of a lower queue); until then the levels, and so the decisions, stay the same."""
        return self._levels.next_crossing(view.now)

    def make_room(self, view: ClusterView, p: Pass, job: JobDemand, pool) -> bool:
        mine = self._queue(job.attained_gpu_s)
        victims = list(self.stopping(view))
        for r in pool:
            if self._levels.level[r.job_id] <= mine:
                break
            victims.append(r)
        return bool(victims) and p.try_preempt(
            job, victims, lambda r: f"preempted for {job.job_id}, a job with less attained service"
        )


def _arrival(job: JobDemand) -> tuple:
    return (job.seq, job.submitted_at)


def _oracle(job: JobDemand) -> float:
    return job.oracle_duration_s if job.oracle_duration_s is not None else float("inf")


def _left(r: RunningJob, now: float) -> float:
    return float("inf") if r.oracle_end_at is None else r.oracle_end_at - now


BASELINES: dict[str, type[Baseline]] = {
    "fifo-quota": FifoCapacity,
    "fifo-backfill": Greedy,
    "sjf-oracle": Sjf,
    "srtf-oracle": Srtf,
    "las": Las,
}
POLICIES = ("default", *BASELINES)
ALIASES = {"fifo": "fifo-quota"}  # the old name of fifo-quota (issue 16 renamed it)


def canonical_policy(name: str) -> str:
    """The policy's name, its alias resolved (`fifo` → `fifo-quota`)."""
    return ALIASES.get(name, name)


def make_baseline(config: SchedulerConfig) -> Baseline:
    try:
        return BASELINES[canonical_policy(config.policy)](config)
    except KeyError:
        raise ValueError(
            f"unknown scheduler policy {config.policy!r}; one of: {', '.join(POLICIES)}"
        ) from None
