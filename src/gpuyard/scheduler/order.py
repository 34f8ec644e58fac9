"""Queue order: inside a tenant (priority, then FIFO or LAS, with aging) and across tenants
(weighted dominant share, see `QuotaBook.share_key`).

Inside a tenant a job's key is, lowest first:
- aged (queued longer than `aging_s`): `(0, submitted_at, seq)` — oldest aged job first,
  whatever its priority, so no job waits forever behind a stream of higher-priority ones;
- otherwise `(1, -priority, las_queue, submitted_at, seq)`, where `las_queue` is 0 for
  `fifo` tenants and, for `las` tenants, the index of the first threshold of
  `las_thresholds_gpu_s` above the job's attained GPU-seconds (Tiresias' discretized LAS:
  jobs that received little service go first; no duration knowledge needed).

`TenantQueues` keeps each tenant's queue sorted across cycles (a cache keyed by job id); a
tenant's queue is re-sorted only when its jobs, its policy, or a job's aging changed.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from operator import attrgetter

from gpuyard.model import JobDemand, QueuePolicy, Tenant
from gpuyard.scheduler.view import SchedulerConfig

JobKey = tuple[float, ...]
Entry = tuple[JobKey, str]  # (order key, job id)


def job_key(job: JobDemand, policy: QueuePolicy, now: float, config: SchedulerConfig) -> JobKey:
    if now - job.submitted_at >= config.aging_s:
        return (0, job.submitted_at, job.seq)
    las_queue = 0
    if policy is QueuePolicy.LAS:
        las_queue = bisect.bisect_right(config.las_thresholds_gpu_s, job.attained_gpu_s)
    return (1, -job.priority, las_queue, job.submitted_at, job.seq)


def is_aged(job: JobDemand, now: float, config: SchedulerConfig) -> bool:
    return now - job.submitted_at >= config.aging_s


class TenantQueues:
    """Each tenant's queued jobs in order, kept sorted from one cycle to the next."""

    def __init__(self, config: SchedulerConfig) -> None:
        self.config = config
        self.jobs: dict[str, JobDemand] = {}
        self.queues: dict[str, list[Entry]] = {}
        self._policy: dict[str, QueuePolicy] = {}
        self._next_aging: dict[str, float] = {}
        self._by_id: dict[int, JobDemand] = {}
        self._entry: dict[int, Entry] = {}  # id(job) → its entry in its tenant's queue

    def sync(
        self, queued: Sequence[JobDemand], tenants: Mapping[str, Tenant], now: float
    ) -> dict[str, list[Entry]]:
        """Bring the queues in line with `queued`; returns tenant → [(key, job id)] in order."""
        # diff by object identity, in C loops: the old objects are alive until the end of the
        # diff (held in `_by_id`), so an id cannot be reused by a new object meanwhile
        by_id = dict(zip(map(id, queued), queued, strict=True))
        added = [by_id[i] for i in by_id.keys() - self._by_id.keys()]
        gone = [self._by_id[i] for i in self._by_id.keys() - by_id.keys()]
        self._by_id = by_id
        current = dict(zip(map(_job_id, queued), queued, strict=True))
        self.jobs = current
        stale = self._policy_or_aging_changed(tenants, now)
        self._remove(gone, stale)
        self._insert(added, stale, tenants, now)
        members: dict[str, list[JobDemand]] = {tenant: [] for tenant in stale}
        for job in current.values():
            if job.tenant in members:
                members[job.tenant].append(job)
        for tenant, jobs in members.items():
            self._rebuild(tenant, jobs, tenants, now)
        return self.queues

    def _remove(self, gone: list[JobDemand], stale: set[str]) -> None:
        for job in gone:
            entry = self._entry.pop(id(job), None)
            if job.tenant in stale or entry is None:
                continue
            queue = self.queues.get(job.tenant, [])
            i = bisect.bisect_left(queue, entry)
            if i < len(queue) and queue[i] == entry:
                del queue[i]
            if not queue:
                for table in (self.queues, self._policy, self._next_aging):
                    table.pop(job.tenant, None)

    def _insert(
        self, added: list[JobDemand], stale: set[str], tenants: Mapping[str, Tenant], now: float
    ) -> None:
        for job in added:
            if job.tenant in stale:
                continue
            policy = _policy(tenants, job.tenant)
            queue = self.queues.setdefault(job.tenant, [])
            self._policy.setdefault(job.tenant, policy)
            entry = (job_key(job, policy, now, self.config), job.job_id)
            self._entry[id(job)] = entry
            bisect.insort(queue, entry)
            if not is_aged(job, now, self.config):
                aging = job.submitted_at + self.config.aging_s
                self._next_aging[job.tenant] = min(self._next_aging.get(job.tenant, aging), aging)

    def _policy_or_aging_changed(self, tenants: Mapping[str, Tenant], now: float) -> set[str]:
        changed = {t for t, at in self._next_aging.items() if now >= at}
        for tenant, policy in self._policy.items():
            if _policy(tenants, tenant) is not policy:
                changed.add(tenant)
        return changed

    def _rebuild(
        self, tenant: str, jobs: list[JobDemand], tenants: Mapping[str, Tenant], now: float
    ) -> None:
        policy = _policy(tenants, tenant)
        if not jobs:
            for table in (self.queues, self._policy, self._next_aging):
                table.pop(tenant, None)
            return
        entries = []
        for j in jobs:
            entry = (job_key(j, policy, now, self.config), j.job_id)
            self._entry[id(j)] = entry
            entries.append(entry)
        entries.sort()
        self.queues[tenant] = entries
        self._policy[tenant] = policy
        waiting = [
            j.submitted_at + self.config.aging_s for j in jobs if not is_aged(j, now, self.config)
        ]
        self._next_aging[tenant] = min(waiting, default=float("inf"))


def _policy(tenants: Mapping[str, Tenant], tenant: str) -> QueuePolicy:
    t = tenants.get(tenant)
    return t.queue_policy if t else QueuePolicy.FIFO


_job_id = attrgetter("job_id")
