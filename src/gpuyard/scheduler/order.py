"""Queue order: inside a tenant (priority, then LAS or FIFO, with promotion) and across
tenants (weighted dominant share, see `QuotaBook.share_key`).

Inside a tenant a job's key is, lowest first:
- promoted (queued longer than its `wait_limit`, "aged" in the code): `(0, submitted_at,
  seq)` — oldest promoted job first, whatever its priority or attained service, so no job
  waits forever behind a stream of higher-priority or less-served ones (it also demotes as a
  job of the first LAS queue: `round.Round._demotion_now`; nothing is held back behind it);
- otherwise `(1, -standing, las_queue, submitted_at, seq)`, where `standing` is the job's
  class then priority (`model.standing`: a `normal` job's is its priority, `prod` jobs
  come first) and `las_queue`, for `las`
  tenants (the default), is the index of the first threshold of `las_thresholds_gpu_s`
  above the job's attained GPU-seconds (Tiresias' discretized LAS: jobs that received
  little service go first; no duration knowledge needed), and 0 for `fifo` tenants;
- an `opportunistic`-class job: `(2, -standing, las_queue, submitted_at, seq)`, after every
  other job of its tenant, and never promoted (it only ever uses idle capacity).

`TenantQueues` keeps each tenant's queue sorted across cycles (insert and remove by diff, a
job moved once when it is promoted); a tenant's queue is re-sorted only when its policy
changed.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import Counter
from collections.abc import Mapping

from gpuyard.model import JobDemand, QueuePolicy, Tenant
from gpuyard.scheduler.mirror import QueueMirror
from gpuyard.scheduler.view import ClusterView, SchedulerConfig, ViewChanges

JobKey = tuple[float, ...]
Entry = tuple[JobKey, str]  # (order key, job id)


def wait_limit(job: JobDemand, config: SchedulerConfig) -> float:
    """How long `job` waits before it is promoted: `aging_s`, or longer for a job that
    already ran (`aging_per_run_s` × the seconds it ran in earlier attempts; Tiresias'
    STARVELIMIT, so a demoted long job does not come back on top right after each
    demotion)."""
    if not config.aging_per_run_s or not job.attained_gpu_s:
        return config.aging_s
    ran_s = job.attained_gpu_s / max(1, job.total.gpus)
    return max(config.aging_s, config.aging_per_run_s * ran_s)


def job_key(job: JobDemand, policy: QueuePolicy, now: float, config: SchedulerConfig) -> JobKey:
    if is_aged(job, now, config):
        return (0, job.submitted_at, job.seq)
    las_queue = 0
    if policy is QueuePolicy.LAS:
        las_queue = bisect.bisect_right(config.las_thresholds_gpu_s, job.attained_gpu_s)
    group = 2 if job.opportunistic_class else 1
    return (group, -job.standing, las_queue, job.submitted_at, job.seq)


def is_aged(job: JobDemand, now: float, config: SchedulerConfig) -> bool:
    """Promoted: waited past its wait limit (never, for an `opportunistic` job)."""
    return not job.opportunistic_class and now - job.submitted_at >= wait_limit(job, config)


def widest_task(job: JobDemand) -> int:
    """The most whole GPUs one task of `job` needs on one node (0: none needs any); of a job
    without gang allocation, which starts with any one task, the least."""
    sizes = [t.resources.gpus for t in job.tasks if t.gpu_share is None]
    if not job.gang and len(sizes) < len(job.tasks):
        return 0  # one of its tasks needs no whole GPU
    if not job.gang:
        return min(sizes, default=0)
    return max(sizes, default=0)


class TenantQueues:
    """Each tenant's queued jobs in order, kept sorted from one cycle to the next: joined
    jobs are inserted, gone ones removed (`QueueMirror` says which), and a job that ages is
    moved to its aged place when its time comes (a heap by submission time), so a cycle's
    work follows the changes, not the queue's length. A tenant whose queue policy changed is
    re-sorted. It also counts, per tenant, its queued jobs by `widest_task`."""

    def __init__(self, config: SchedulerConfig) -> None:
        self.config = config
        self.queues: dict[str, list[Entry]] = {}
        self._mirror = QueueMirror()
        self._policy: dict[str, QueuePolicy] = {}
        self._entry: dict[int, Entry] = {}  # id(job) → its entry in its tenant's queue
        # (submitted_at + extra wait, seq, job id, submitted_at) of unaged jobs
        self._aging: list[tuple[float, int, str, float]] = []
        self._widest: dict[str, Counter[int]] = {}  # tenant → widest_task → queued jobs

    @property
    def jobs(self) -> dict[str, JobDemand]:
        return self._mirror.jobs

    def sync(self, view: ClusterView, changes: ViewChanges | None) -> dict[str, list[Entry]]:
        """Bring the queues in line with `view.queued` (from `changes` when they follow the
        last view); returns tenant → [(key, job id)] in order."""
        tenants, now = view.tenants, view.now
        gone, added = self._mirror.sync(view.queued, changes)
        for job in gone:
            self._remove(job)
        for job in added:
            self._insert(job, _policy(tenants, job.tenant), now)
        self._age(now)
        for tenant, policy in list(self._policy.items()):
            if _policy(tenants, tenant) is not policy:
                self._rebuild(tenant, tenants, now)
        return self.queues

    def narrowest(self, tenant: str) -> int:
        """The least `widest_task` among the tenant's queued jobs: while no node has that
        many GPUs free, none of its jobs can start."""
        return min(self._widest.get(tenant) or (0,))

    def next_aging(self) -> float:
        """No queued job ages before this time (inf: none will; the earliest entry may be of
        a job that left the queue since, which makes it earlier, never later)."""
        return self._aging[0][0] + self.config.aging_s if self._aging else math.inf

    def _remove(self, job: JobDemand) -> None:
        entry = self._entry.pop(id(job), None)
        queue = self.queues.get(job.tenant)
        if entry is None or queue is None:
            return
        i = bisect.bisect_left(queue, entry)
        if i < len(queue) and queue[i] == entry:
            del queue[i]
            counts, widest = self._widest[job.tenant], widest_task(job)
            counts[widest] -= 1
            if not counts[widest]:
                del counts[widest]
        if not queue:
            del self.queues[job.tenant]
            del self._policy[job.tenant]
            self._widest.pop(job.tenant, None)

    def _insert(self, job: JobDemand, policy: QueuePolicy, now: float) -> None:
        queue = self.queues.setdefault(job.tenant, [])
        self._policy.setdefault(job.tenant, policy)
        entry = (job_key(job, policy, now, self.config), job.job_id)
        self._entry[id(job)] = entry
        bisect.insort(queue, entry)
        self._widest.setdefault(job.tenant, Counter())[widest_task(job)] += 1
        if entry[0][0] == 1:
            due = job.submitted_at + (wait_limit(job, self.config) - self.config.aging_s)
            heapq.heappush(self._aging, (due, job.seq, job.job_id, job.submitted_at))

    def _age(self, now: float) -> None:
        """Move the jobs that have aged since the last cycle to the front part of their
        queue (entries of jobs that left the queue are dropped on the way)."""
        aging, jobs = self._aging, self.jobs
        while aging and now - aging[0][0] >= self.config.aging_s:
            item = heapq.heappop(aging)
            job = jobs.get(item[2])
            if job is None:
                continue
            entry = self._entry.get(id(job))
            if entry is None or entry[0][0] != 1 or job.submitted_at != item[3]:
                continue
            if not is_aged(job, now, self.config):  # rounding of a longer wait limit
                heapq.heappush(aging, item)
                break
            self._remove(job)
            self._insert(job, self._policy.get(job.tenant, QueuePolicy.FIFO), now)

    def _rebuild(self, tenant: str, tenants: Mapping[str, Tenant], now: float) -> None:
        mine = [j for j in self.jobs.values() if j.tenant == tenant]
        for job in mine:
            self._remove(job)
        for job in mine:
            self._insert(job, _policy(tenants, tenant), now)


def _policy(tenants: Mapping[str, Tenant], tenant: str) -> QueuePolicy:
    t = tenants.get(tenant)
    return t.queue_policy if t else QueuePolicy.FIFO
