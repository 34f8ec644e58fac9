"""What `/metrics` exports, read when Prometheus scrapes: a `ClusterSample` built from the
store, the engine's nodes and every node's own readings.

Tenant GPUs (guaranteed, used, borrowed, lent) are the queue view's numbers
(`services.queue`); budgets are the controller's (`tenant_usage`). DCGM GPU readings and task
CPU and memory are read on each node by its agent, from its own NVML and its tasks' cgroups
(`engine.readings`), all nodes at once and at most `NODE_READINGS_TIMEOUT_S` waited for: a
node that does not answer in time has `scrape_up` 0 and none of its readings in this scrape
(Prometheus marks them stale), never older ones. Fake GPUs have none.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

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
from gpuyard.runtime.nodereadings import NodeReadings
from gpuyard.store import TaskRecord

MIB = 1024 * 1024
NODE_READINGS_TIMEOUT_S = 2.0  # the most a scrape waits for the nodes' readings
MIN_READINGS_TIMEOUT_S = 0.1

Readings = Mapping[str, NodeReadings | None]  # node → its readings; None: did not answer


def readings_timeout(scrape_timeout: str | None) -> float:
    """How long to wait for the nodes: half the scraper's own timeout (Prometheus' header
    `X-Prometheus-Scrape-Timeout-Seconds`), at most `NODE_READINGS_TIMEOUT_S`; that without
    a usable header."""
    try:
        given = float(scrape_timeout) if scrape_timeout else None
    except ValueError:
        given = None
    if given is None or not given > 0:  # also NaN
        return NODE_READINGS_TIMEOUT_S
    return max(MIN_READINGS_TIMEOUT_S, min(NODE_READINGS_TIMEOUT_S, given / 2))


def cluster_sample(ctl: Controller, timeout_s: float = NODE_READINGS_TIMEOUT_S) -> ClusterSample:
    nodes = ctl.engine.nodes()
    readings = ctl.engine.readings(timeout_s)
    tenants = ctl.store.tenants.tenants()
    tasks = ctl.store.jobs.active_tasks()
    bound = ctl.store.jobs.in_states(JobState.SCHEDULED, JobState.RUNNING)
    tenant_of = {j.id: j.tenant for j in bound}
    holders = _holders(tasks, tenant_of)
    now = ctl.clock.now()
    return ClusterSample(
        jobs=ctl.store.jobs.counts(),
        flavors=_flavors(ctl, nodes, tenants),
        budgets=_budgets(ctl, tenants, now),
        queues=_queues(ctl.store.jobs.queues(), now),
        nodes=_nodes(ctl, nodes, tasks, readings),
        gpus=_allocations(nodes, holders),
        tasks=_task_usage(tasks, tenant_of, readings),
        readings=_gpu_readings(readings, nodes, holders),
        idle_jobs=ctl.idle_jobs(),
        preemptions=ctl.store.jobs.preemptions_by_tenant(),
        job_preemptions=ctl.store.jobs.preempted(
            JobState.QUEUED, JobState.SCHEDULED, JobState.RUNNING
        ),
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


def _queues(queues: dict[str, tuple[int, float]], now: float) -> list[QueueSample]:
    return [
        QueueSample(tenant, n, max(0.0, now - oldest))
        for tenant, (n, oldest) in sorted(queues.items())
    ]


def _nodes(
    ctl: Controller, live: Sequence[Node], tasks: list[TaskRecord], readings: Readings
) -> list[NodeSample]:
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
            readings.get(n.name) is not None,
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


def _task_usage(
    tasks: Iterable[TaskRecord], tenant_of: dict[str, str], readings: Readings
) -> list[TaskUsage]:
    """Each active task's cgroup usage, as its own node read it (a node reports its tasks only)."""
    out = []
    for t in tasks:
        node = readings.get(t.node)
        usage = node.tasks.get(t.key) if node is not None else None
        if usage is not None:
            tenant = tenant_of.get(t.job_id, "")
            out.append(
                TaskUsage(t.job_id, tenant, t.name, t.node, usage.cpu_seconds, usage.memory_bytes)
            )
    return out


def _gpu_readings(readings: Readings, nodes: Sequence[Node], holders: Holders) -> list[GpuReading]:
    """Each node's NVML samples, with the node and the (first) job holding the GPU."""
    out = []
    for n in nodes:
        node = readings.get(n.name)
        if node is None:
            continue
        index_of = {g.uuid: g.index for g in n.gpus if not g.fake}
        for s in node.gpus:
            index = index_of.get(s.uuid, s.index)
            job, tenant = (holders.get((n.name, index)) or [("", "")])[0]
            out.append(GpuReading(s, n.name, job, tenant))
    return out
