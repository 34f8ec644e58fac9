"""The snapshot and the quota book, kept in step with the running jobs across cycles.

This is a cache, never the truth: each cycle `sync` compares it with the view's running jobs
(by job id and placements) and charges or refunds the difference, and it rebuilds everything
when the nodes or the tenants change. Jobs admitted in a cycle are charged at once; if the
controller does not bind them they are missing from the next view and are refunded then.

`remove` is Kueue's SimulateWorkloadRemoval: take a running job out of the snapshot and the
book, and get back a function that puts it back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter

from gpuyard.model import Node, RunningJob, TaskPlacement, Tenant
from gpuyard.scheduler.quota import (
    CPU,
    MEMORY,
    QuotaBook,
    Usage,
    flavor_of_key,
    gpu_memory_key,
    is_gpu_memory_key,
    placed_share,
    quota_tenant,
)
from gpuyard.scheduler.snapshot import ClusterSnapshot, Undo
from gpuyard.scheduler.view import ViewChanges


@dataclass(frozen=True, slots=True, init=False)
class Charged:
    tenant: str
    placements: tuple[TaskPlacement, ...]  # as the view gave them
    held: tuple[TaskPlacement, ...]  # those on nodes the snapshot knows
    usage: Usage
    gpus_on: tuple[tuple[str, str, int], ...]  # (node, flavor, GPUs) it holds there

    def __init__(
        self,
        tenant: str,
        placements: tuple[TaskPlacement, ...],
        held: tuple[TaskPlacement, ...],
        usage: Usage,
        gpus_on: tuple[tuple[str, str, int], ...] = (),
    ) -> None:  # by hand: compiled, it is built natively (docs/sim.md, Fast replays)
        object.__setattr__(self, "tenant", tenant)
        object.__setattr__(self, "placements", placements)
        object.__setattr__(self, "held", held)
        object.__setattr__(self, "usage", usage)
        object.__setattr__(self, "gpus_on", gpus_on)


def charged_to(r: RunningJob) -> str:
    """The book entry a running job is charged to (`quota.quota_tenant`)."""
    return quota_tenant(r.tenant, r.opportunistic_class)


class ClusterState:
    def __init__(self) -> None:
        self._nodes: tuple[Node, ...] | None = None
        self._tenants: dict[str, Tenant] | None = None
        self.snapshot = ClusterSnapshot(())
        self.book = QuotaBook({}, {})
        self.charged: dict[str, Charged] = {}
        self.released: set[str] = set()  # resource keys freed since the last cycle
        self.rebuilt = True
        self._by_id: dict[int, RunningJob] | None = {}  # last sync's jobs by id (None: unknown)
        self._running: dict[str, RunningJob] | None = None  # last sync's jobs by job id
        self._touched: dict[str, None] = {}  # jobs charged or removed since the last sync

    def sync(
        self,
        nodes: Sequence[Node],
        tenants: Mapping[str, Tenant],
        running: Sequence[RunningJob],
        changes: ViewChanges | None = None,
    ) -> None:
        self.released = set()
        self.rebuilt = self._nodes != tuple(nodes) or self._tenants != dict(tenants)
        if self.rebuilt:
            self._rebuild(tuple(nodes), dict(tenants))
        elif changes is not None and self._follow(changes, len(running)):
            return
        self._touched = {}
        # diff in C loops: jobs gone from the view are refunded (and so are jobs charged by
        # the last cycle that the caller did not bind); a RunningJob object not seen last
        # time is checked for a move; jobs not charged yet are charged
        by_id = dict(zip(map(id, running), running, strict=True))
        old = self._by_id
        fresh = by_id.keys() if self.rebuilt or old is None else by_id.keys() - old.keys()
        fresh_jobs = [r for r in running if id(r) in fresh] if fresh else []
        self._by_id = by_id
        current = self._running = dict(zip(map(_job_id, running), running, strict=True))
        gone = self.charged.keys() - current.keys()
        for job_id in [j for j in self.charged if j in gone] if gone else ():
            self._release(job_id)  # in the order they were charged, as before
        for r in fresh_jobs:
            c = self.charged.get(r.job_id)
            if c is not None and (charged_to(r) != c.tenant or r.placements != c.placements):
                self._release(r.job_id)
        missing = current.keys() - self.charged.keys()
        for r in running if missing else ():
            if r.job_id in missing:
                self.charge(r.job_id, charged_to(r), r.placements)

    def _follow(self, changes: ViewChanges, count: int) -> bool:
        """`sync` from the view's changes (`ViewChanges`): the same charges and refunds, in
        the same order, as comparing the whole list, at the cost of the changes. Only the
        changed jobs and those charged or removed by the last cycle can differ. False (the
        caller compares the whole list) when the changes do not add up to `count` jobs."""
        if self._running is None:
            return False
        current = dict(self._running)
        for job_id in changes.stopped:
            current.pop(job_id, None)
        for r in changes.started:
            current[r.job_id] = r
        if len(current) != count:
            return False
        check = self._touched.keys() | changes.stopped | {r.job_id for r in changes.started}
        self._touched, self._running, self._by_id = {}, current, None
        gone = {j for j in check if j in self.charged and j not in current}
        for job_id in [j for j in self.charged if j in gone] if gone else ():
            self._release(job_id)
        for r in changes.started:
            c = self.charged.get(r.job_id)
            if c is not None and (charged_to(r) != c.tenant or r.placements != c.placements):
                self._release(r.job_id)
        missing = {j for j in check if j in current and j not in self.charged}
        for r in current.values() if missing else ():
            if r.job_id in missing:
                self.charge(r.job_id, charged_to(r), r.placements)
        self._touched = {}
        return True

    def _release(self, job_id: str) -> None:
        usage = self.charged[job_id].usage
        self.released.update(usage)
        self.released.update(flavor_of_key(k) for k in usage)  # a shared GPU may be free now
        self._drop(job_id)

    def _rebuild(self, nodes: tuple[Node, ...], tenants: dict[str, Tenant]) -> None:
        self._nodes, self._tenants = nodes, tenants
        self.snapshot = ClusterSnapshot(nodes)
        capacity = dict(self.snapshot.capacity_by_flavor)
        capacity[CPU] = self.snapshot.capacity.cpu_milli
        capacity[MEMORY] = self.snapshot.capacity.memory_mb
        for flavor, mb in self.snapshot.gpu_memory_by_flavor.items():
            capacity[gpu_memory_key(flavor)] = mb
        per_gpu: dict[str, int] = {}
        for n in nodes:
            for g in n.gpus:
                per_gpu[g.type] = min(per_gpu.get(g.type, g.memory_mb), g.memory_mb)
        self.book = QuotaBook(tenants, capacity, per_gpu)
        self.charged = {}

    def usage_of(self, placements: tuple[TaskPlacement, ...]) -> Usage:
        """Raw usage (shared tasks as placed MB): `book.normalise` it before charging."""
        usage: Usage = {CPU: 0, MEMORY: 0}
        for t in placements:
            usage[CPU] += t.resources.cpu_milli
            usage[MEMORY] += t.resources.memory_mb
            nf = self.snapshot.nodes.get(t.node)
            for i in t.gpu_indices:
                flavor = nf.flavor_of.get(i) if nf else None
                if flavor is not None and t.shared:
                    placed_share(usage, flavor, t.gpu_memory_mb)
                elif flavor is not None:
                    usage[flavor] = usage.get(flavor, 0) + 1
        return usage

    def gpus_on(self, placements: tuple[TaskPlacement, ...]) -> tuple[tuple[str, str, int], ...]:
        """(node, flavor, GPUs) that `placements` hold on schedulable nodes, shared GPUs
        included: what their release may free there, for `preempt.could_fit`'s bound."""
        counts: dict[tuple[str, str], int] = {}
        for t in placements:
            nf = self.snapshot.nodes.get(t.node)
            if nf is None or not nf.node.schedulable:
                continue
            for i in t.gpu_indices:
                flavor = nf.flavor_of.get(i)
                if flavor is not None:
                    counts[t.node, flavor] = counts.get((t.node, flavor), 0) + 1
        return tuple((node, flavor, n) for (node, flavor), n in counts.items())

    def charge(self, job_id: str, tenant: str, placements: tuple[TaskPlacement, ...]) -> Undo:
        known = tuple(t for t in placements if t.node in self.snapshot.nodes)
        usage = self.book.normalise(tenant, self.usage_of(known))
        c = Charged(tenant, placements, known, usage, self.gpus_on(known))
        self.snapshot.assume_tasks(known)
        self.book.charge(tenant, c.usage)
        self.charged[job_id] = c
        self._touched[job_id] = None
        return lambda: self._forget(job_id)

    def _forget(self, job_id: str) -> None:
        self._drop(job_id)

    def remove(self, job_id: str) -> Undo:
        c = self._drop(job_id)
        return lambda: self._restore(job_id, c)

    def _drop(self, job_id: str) -> Charged:
        c = self.charged.pop(job_id)
        self._touched[job_id] = None
        self.snapshot.release_tasks(c.held)
        self.book.refund(c.tenant, c.usage)
        return c

    def _restore(self, job_id: str, c: Charged) -> None:
        self.snapshot.assume_tasks(c.held)
        self.book.charge(c.tenant, c.usage)
        self.charged[job_id] = c
        self._touched[job_id] = None

    def free(self, key: str) -> int:
        if key == CPU:
            return self.snapshot.free_cpu_milli
        if key == MEMORY:
            return self.snapshot.free_memory_mb
        if is_gpu_memory_key(key):
            return self.snapshot.free_gpu_memory_by_flavor.get(flavor_of_key(key), 0)
        return self.snapshot.free_by_flavor.get(key, 0)


_job_id = attrgetter("job_id")
