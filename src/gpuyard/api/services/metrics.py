"""What `/metrics` exports, read when Prometheus scrapes: a `ClusterSample` built from the
store, the engine's nodes, the tasks' cgroups and NVML.

Tenant GPUs (guaranteed, used, borrowed, lent) are the queue view's numbers
(`services.queue`); budgets are the controller's (`tenant_usage`). Task CPU and memory are read
from the cgroups of the tasks that run on this host (a task elsewhere has no cgroup here), and
DCGM readings come from this host's NVML: fake GPUs have none.
"""

from __future__ import annotations

import socket
from collections import defaultdict
from collections.abc import Iterable, Sequence

from gpuyard.api.services.queue import cluster_usage, flavor_shares, lent_per_flavor
from gpuyard.controller import Controller
from gpuyard.controller.view import tenant_usage
from gpuyard.metrics import (
    ClusterSample,
    GpuAllocation,
    GpuReading,
    NodeSample,
    QueueSample,
    TaskUsage,
    TenantBudget,
    TenantFlavor,
)
from gpuyard.model import JobState, Node, Tenant
from gpuyard.runtime.cgroups import task_usage
from gpuyard.runtime.gpustats import NvmlSampler
from gpuyard.runtime.oci import cgroup_path
from gpuyard.store import JobRecord, TaskRecord

MIB = 1024 * 1024


def cluster_sample(ctl: Controller, gpus: NvmlSampler | None) -> ClusterSample:
    nodes = ctl.engine.nodes()
    tenants = ctl.store.tenants.tenants()
    tasks = ctl.store.jobs.active_tasks()
    bound = ctl.store.jobs.in_states(JobState.SCHEDULED, JobState.RUNNING)
    queued = ctl.store.jobs.in_states(JobState.QUEUED)
    tenant_of = {j.id: j.tenant for j in bound}
    holders = _holders(tasks, tenant_of)
    now = ctl.clock.now()
    return ClusterSample(
        jobs=ctl.store.jobs.counts(),
        flavors=_flavors(ctl, nodes, tenants),
        budgets=_budgets(ctl, tenants, now),
        queues=_queues(queued, now),
        nodes=_nodes(ctl, nodes, tasks),
        gpus=_allocations(nodes, holders),
        tasks=_task_usage(tasks, tenant_of),
        readings=_readings(gpus, nodes, holders),
        idle_jobs=ctl.idle_jobs(),
        preemptions=ctl.store.jobs.preemptions_by_tenant(),
        job_preemptions={
            (j.id, j.tenant): j.preemptions for j in [*bound, *queued] if j.preemptions
        },
    )


def _flavors(ctl: Controller, nodes: Sequence[Node], tenants: list[Tenant]) -> list[TenantFlavor]:
    cluster = cluster_usage(ctl, nodes)
    lent = lent_per_flavor(tenants, cluster)
    return [
        TenantFlavor(t.name, s.flavor, s.guaranteed, s.used, s.borrowed, s.lent)
        for t in tenants
        for s in flavor_shares(t, cluster, lent)
    ]


def _budgets(ctl: Controller, tenants: list[Tenant], now: float) -> list[TenantBudget]:
    usage = tenant_usage(ctl.store, tenants, now)
    return [
        TenantBudget(t.name, str(t.budget_period), t.gpu_hour_budget, usage[t.name].gpu_hours)
        for t in tenants
        if t.gpu_hour_budget is not None and t.name in usage
    ]


def _queues(queued: Iterable[JobRecord], now: float) -> list[QueueSample]:
    waits: dict[str, list[float]] = defaultdict(list)
    for j in queued:
        waits[j.tenant].append(max(0.0, now - (j.queued_at or j.submitted_at)))
    return [QueueSample(t, len(w), max(w)) for t, w in sorted(waits.items())]


def _nodes(ctl: Controller, live: Sequence[Node], tasks: list[TaskRecord]) -> list[NodeSample]:
    cpu: dict[str, int] = defaultdict(int)
    memory: dict[str, int] = defaultdict(int)
    for t in tasks:
        cpu[t.node] += t.cpu_milli
        memory[t.node] += t.memory_mb
    live_names = {n.name for n in live}
    gone = [n for n in ctl.store.nodes.list() if n.name not in live_names]
    return [
        NodeSample(
            n.name,
            n.name in live_names,
            n.schedulable,
            n.cpu_milli / 1000,
            n.memory_mb * MIB,
            cpu[n.name] / 1000,
            memory[n.name] * MIB,
        )
        for n in [*live, *gone]
    ]


Holders = dict[tuple[str, int], list[tuple[str, str]]]  # (node, GPU) → [(job, tenant)]


def _holders(tasks: Iterable[TaskRecord], tenant_of: dict[str, str]) -> Holders:
    out: Holders = defaultdict(list)
    for t in tasks:
        for i in t.gpus:
            holder = (t.job_id, tenant_of.get(t.job_id, ""))
            if holder not in out[(t.node, i)]:
                out[(t.node, i)].append(holder)
    return out


def _allocations(nodes: Sequence[Node], holders: Holders) -> list[GpuAllocation]:
    out = []
    for n in nodes:
        for g in n.gpus:
            base = (n.name, g.index, g.uuid, g.type, g.fake, g.healthy)
            held = holders.get((n.name, g.index)) or [("", "")]
            out.extend(GpuAllocation(*base, job, tenant) for job, tenant in held)
    return out


def _task_usage(tasks: Iterable[TaskRecord], tenant_of: dict[str, str]) -> list[TaskUsage]:
    out = []
    for t in tasks:
        usage = task_usage(cgroup_path(t.key))
        if usage is not None:
            tenant = tenant_of.get(t.job_id, "")
            out.append(
                TaskUsage(t.job_id, tenant, t.name, t.node, usage.cpu_seconds, usage.memory_bytes)
            )
    return out


def _readings(
    gpus: NvmlSampler | None, nodes: Sequence[Node], holders: Holders
) -> list[GpuReading]:
    """NVML samples of this host's GPUs, each with its node and (first) holder."""
    if gpus is None:
        return []
    where = {g.uuid: (n.name, g.index) for n in nodes for g in n.gpus if not g.fake}
    host = socket.gethostname()
    out = []
    for s in gpus.samples():
        node, index = where.get(s.uuid, (host, s.index))
        job, tenant = (holders.get((node, index)) or [("", "")])[0]
        out.append(GpuReading(s, node, job, tenant))
    return out
