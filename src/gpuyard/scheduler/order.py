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

    def sync(
        self, queued: Sequence[JobDemand], tenants: Mapping[str, Tenant], now: float
    ) -> dict[str, list[Entry]]:
        """Bring the queues in line with `queued`; returns tenant → [(key, job id)] in order."""
        current: dict[str, JobDemand] = {}
        added: list[JobDemand] = []
        for job in queued:
            current[job.job_id] = job
            old = self.jobs.get(job.job_id)
            if old is not job and old != job:
                added.append(job)
        gone = [old for job_id, old in self.jobs.items() if _replaced(old, current.get(job_id))]
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
        by_tenant: dict[str, set[str]] = {}
        for job in gone:
            if job.tenant not in stale:
                by_tenant.setdefault(job.tenant, set()).add(job.job_id)
        for tenant, ids in by_tenant.items():
            queue = [e for e in self.queues.get(tenant, ()) if e[1] not in ids]
            if queue:
                self.queues[tenant] = queue
            else:
                for table in (self.queues, self._policy, self._next_aging):
                    table.pop(tenant, None)

    def _insert(
        self, added: list[JobDemand], stale: set[str], tenants: Mapping[str, Tenant], now: float
    ) -> None:
        for job in added:
            if job.tenant in stale:
                continue
            policy = _policy(tenants, job.tenant)
            queue = self.queues.setdefault(job.tenant, [])
            self._policy.setdefault(job.tenant, policy)
            bisect.insort(queue, (job_key(job, policy, now, self.config), job.job_id))
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
        entries = [(job_key(j, policy, now, self.config), j.job_id) for j in jobs]
        entries.sort()
        self.queues[tenant] = entries
        self._policy[tenant] = policy
        waiting = [
            j.submitted_at + self.config.aging_s for j in jobs if not is_aged(j, now, self.config)
        ]
        self._next_aging[tenant] = min(waiting, default=float("inf"))


def _replaced(old: JobDemand, new: JobDemand | None) -> bool:
    return new is not old and new != old


def _policy(tenants: Mapping[str, Tenant], tenant: str) -> QueuePolicy:
    t = tenants.get(tenant)
    return t.queue_policy if t else QueuePolicy.FIFO
