"""What the queue endpoint shows: each tenant's GPUs per flavor and its queue, read from the
store and the engine's nodes the way the scheduler's quota book counts them.

Per tenant T and GPU flavor F (a GPU type as nodes report it; quota flavors match it without
regard to case):

- `guaranteed` — T's quota of F (0 without one);
- `used` — GPUs of F held by the active tasks of T's scheduled and running jobs;
- `borrowed` — `max(0, used − guaranteed)`;
- `lent` — how much of T's unused guarantee borrowers occupy. Borrowers take idle GPUs, and
  the scheduler keeps free the part of an unused guarantee beyond its `lendingLimit`
  (`reserved`). Cluster-wide, with `lendable(T) = min(unused(T), lendingLimit(T))`:

      taken(F) = min(Σ borrowed, max(0, Σ lendable − max(0, idle(F) − Σ reserved)))

  i.e. borrowing first fills the GPUs no tenant is guaranteed, and what goes beyond them
  occupies unused guarantees. `taken` is split among the lenders in proportion to their
  `lendable` (largest remainder, ties by tenant name), so the `lent` column sums to `taken`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gpuyard.api.schemas import (
    FlavorCapacity,
    FlavorShare,
    QueuedJob,
    QueueOut,
    TenantQueue,
    iso,
    spec_gpus,
)
from gpuyard.controller import Controller
from gpuyard.model import FlavorQuota, JobState, Node, Tenant
from gpuyard.store import JobRecord, TaskRecord

PerTenant = dict[str, dict[str, int]]  # tenant → flavor → GPUs


@dataclass(frozen=True, slots=True)
class Cluster:
    """GPUs per flavor: capacity (healthy, schedulable nodes) and what tasks hold."""

    capacity: dict[str, int]
    allocated: dict[str, int]
    used: PerTenant

    def idle(self, flavor: str) -> int:
        return max(0, self.capacity.get(flavor, 0) - self.allocated.get(flavor, 0))

    def flavors(self) -> list[str]:
        """Every flavor the cluster has or a tenant holds."""
        return sorted(set(self.capacity) | {f for u in self.used.values() for f in u})


def queue_view(ctl: Controller, visible: frozenset[str] | None) -> QueueOut:
    """Every tenant the caller may see (`visible`; None: all), with its GPUs and its queue."""
    tenants = ctl.store.tenants.tenants()
    cluster = cluster_usage(ctl, ctl.engine.nodes())
    flavors = cluster.flavors()
    lent = lent_per_flavor(tenants, cluster)
    queues = _queues(ctl.store.jobs.in_states(JobState.QUEUED))
    shown = [t for t in tenants if visible is None or t.name in visible]
    return QueueOut(
        cluster=[
            FlavorCapacity(
                flavor=f, capacity=cluster.capacity.get(f, 0), allocated=cluster.allocated.get(f, 0)
            )
            for f in flavors
        ],
        tenants=[_tenant_queue(t, cluster, lent, queues.get(t.name, [])) for t in shown],
    )


# -- the cluster -----------------------------------------------------------------------


def cluster_usage(ctl: Controller, nodes: Sequence[Node]) -> Cluster:
    flavor_of = {(n.name, g.index): g.type for n in nodes for g in n.gpus}
    capacity: dict[str, int] = defaultdict(int)
    for n in nodes:
        for g in n.gpus:
            if n.schedulable and g.healthy:
                capacity[g.type] += 1
    bound = {j.id: j.tenant for j in ctl.store.jobs.in_states(JobState.SCHEDULED, JobState.RUNNING)}
    used, allocated = _held(ctl.store.jobs.active_tasks(), bound, flavor_of)
    return Cluster(dict(capacity), allocated, used)


def _held(
    tasks: Iterable[TaskRecord], tenant_of: dict[str, str], flavor_of: dict[tuple[str, int], str]
) -> tuple[PerTenant, dict[str, int]]:
    """GPUs held per tenant and flavor (bound jobs only), and per flavor in all."""
    used: PerTenant = defaultdict(lambda: defaultdict(int))
    allocated: dict[str, int] = defaultdict(int)
    for t in tasks:
        for i in t.gpus:
            flavor = flavor_of.get((t.node, i))
            if flavor is None:
                continue
            allocated[flavor] += 1
            if t.job_id in tenant_of:
                used[tenant_of[t.job_id]][flavor] += 1
    return {k: dict(v) for k, v in used.items()}, dict(allocated)


# -- guaranteed, used, borrowed, lent --------------------------------------------------


def quota_of(tenant: Tenant, flavor: str) -> FlavorQuota | None:
    return next((q for q in tenant.quotas if q.flavor.upper() == flavor.upper()), None)


def _guaranteed(tenant: Tenant, flavor: str) -> int:
    q = quota_of(tenant, flavor)
    return q.guaranteed if q else 0


def _used(cluster: Cluster, tenant: str, flavor: str) -> int:
    return cluster.used.get(tenant, {}).get(flavor, 0)


def _unused(tenant: Tenant, flavor: str, cluster: Cluster) -> tuple[int, int]:
    """(lendable, reserved): the tenant's unused guarantee of `flavor`, split by its
    lending limit into what borrowers may take and what the scheduler keeps free."""
    q = quota_of(tenant, flavor)
    if q is None:
        return 0, 0
    unused = max(0, q.guaranteed - _used(cluster, tenant.name, flavor))
    lendable = unused if q.lending_limit is None else min(unused, q.lending_limit)
    return lendable, unused - lendable


def lent_by_tenant(tenants: Sequence[Tenant], flavor: str, cluster: Cluster) -> dict[str, int]:
    """How many of each tenant's unused guaranteed GPUs of `flavor` borrowers occupy."""
    borrowed = sum(max(0, _used(cluster, t.name, flavor) - _guaranteed(t, flavor)) for t in tenants)
    unused = {t.name: _unused(t, flavor, cluster) for t in tenants}
    lendable = {name: lend for name, (lend, _) in unused.items() if lend > 0}
    reserved = sum(r for _, r in unused.values())
    free_for_lendable = max(0, cluster.idle(flavor) - reserved)
    taken = min(borrowed, max(0, sum(lendable.values()) - free_for_lendable))
    return split(taken, lendable)


def lent_per_flavor(tenants: Sequence[Tenant], cluster: Cluster) -> dict[str, dict[str, int]]:
    """Flavor → tenant → GPUs lent (`lent_by_tenant` for every flavor of the cluster)."""
    return {f: lent_by_tenant(tenants, f, cluster) for f in cluster.flavors()}


def split(total: int, weights: dict[str, int]) -> dict[str, int]:
    """`total` in proportion to `weights` (largest remainder; ties by name)."""
    whole = sum(weights.values())
    if total <= 0 or whole <= 0:
        return {}
    shares = {k: total * w // whole for k, w in weights.items()}
    left = total - sum(shares.values())
    by_remainder = sorted(weights, key=lambda k: (-(total * weights[k] % whole), k))
    for k in by_remainder[:left]:
        shares[k] += 1
    return shares


def flavor_shares(
    tenant: Tenant, cluster: Cluster, lent: dict[str, dict[str, int]]
) -> list[FlavorShare]:
    """The tenant's guaranteed, used, borrowed and lent GPUs of each flavor it has or holds."""
    used = cluster.used.get(tenant.name, {})
    names = {f.upper(): f for f in cluster.capacity}
    flavors = {names.get(q.flavor.upper(), q.flavor) for q in tenant.quotas} | set(used)
    out = []
    for f in sorted(flavors):
        q = quota_of(tenant, f)
        guaranteed, n = _guaranteed(tenant, f), used.get(f, 0)
        out.append(
            FlavorShare(
                flavor=f,
                guaranteed=guaranteed,
                used=n,
                borrowed=max(0, n - guaranteed),
                lent=lent.get(f, {}).get(tenant.name, 0),
                borrowing_limit=q.borrowing_limit if q else None,
                lending_limit=q.lending_limit if q else None,
            )
        )
    return out


# -- the queues ------------------------------------------------------------------------


def _queues(queued: Iterable[JobRecord]) -> dict[str, list[JobRecord]]:
    """Each tenant's queued jobs in queue order: by stored position, then unplaced ones by
    submission (a job submitted since the last cycle has no position yet)."""
    by_tenant: dict[str, list[JobRecord]] = defaultdict(list)
    for j in queued:
        by_tenant[j.tenant].append(j)
    for jobs in by_tenant.values():
        jobs.sort(key=lambda j: (j.pending_position is None, j.pending_position or 0, j.seq))
    return by_tenant


def _queued_job(j: JobRecord) -> QueuedJob:
    return QueuedJob(
        id=j.id,
        name=j.name,
        owner=j.owner,
        gpus=spec_gpus(j.spec),
        priority=j.priority,
        pending_code=j.pending_code,
        pending_reason=j.pending_reason,
        position=j.pending_position,
        queue_length=j.pending_queue_length,
        estimated_start=iso(j.pending_eta),
        estimated_start_basis=j.pending_eta_basis,
        preemptions=j.preemptions,
        submitted_at=iso(j.submitted_at),
    )


def _tenant_queue(
    tenant: Tenant, cluster: Cluster, lent: dict[str, dict[str, int]], queued: list[JobRecord]
) -> TenantQueue:
    return TenantQueue(
        name=tenant.name,
        weight=tenant.weight,
        queue_policy=str(tenant.queue_policy),
        flavors=flavor_shares(tenant, cluster, lent),
        queue=[_queued_job(j) for j in queued],
    )
