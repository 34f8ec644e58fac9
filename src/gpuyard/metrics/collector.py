"""`ClusterCollector`: the platform's state as metric families, built when Prometheus scrapes.

It asks its `sample` function once per scrape for a `ClusterSample` (bounded work: grouped
counts, the active tasks, the nodes and their GPUs) and keeps nothing between scrapes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from gpuyard.metrics.dcgm import dcgm_families
from gpuyard.metrics.sample import ClusterSample
from gpuyard.model import JobState

MIB = 1024 * 1024


class ClusterCollector:
    def __init__(self, sample: Callable[[], ClusterSample]) -> None:
        self._sample = sample

    def collect(self) -> Iterator[Metric]:
        s = self._sample()
        yield _jobs(s)
        yield from _tenants(s)
        yield from _queues(s)
        yield from _nodes(s)
        yield from _gpus(s)
        yield from _tasks(s)
        yield _idle(s)
        yield from _preemptions(s)
        yield from dcgm_families(s.readings)


def _jobs(s: ClusterSample) -> Metric:
    family = GaugeMetricFamily(
        "gpuyard_jobs", "Jobs by tenant and state (ended ones too).", labels=["tenant", "state"]
    )
    tenants = sorted({t for t, _ in s.jobs} | {f.tenant for f in s.flavors})
    for tenant in tenants:
        for state in JobState:
            family.add_metric([tenant, str(state)], s.jobs.get((tenant, state), 0))
    return family


def _tenants(s: ClusterSample) -> Iterator[Metric]:
    labels = ["tenant", "flavor"]
    columns = {
        "guaranteed": "GPUs of the flavor guaranteed to the tenant (its quota).",
        "used": "GPUs of the flavor held by the tenant's scheduled and running jobs.",
        "borrowed": "GPUs the tenant uses beyond its guarantee (opportunistic).",
        "lent": "GPUs of the tenant's unused guarantee that other tenants' borrowers occupy.",
    }
    for column, text in columns.items():
        family = GaugeMetricFamily(f"gpuyard_tenant_gpus_{column}", text, labels=labels)
        for f in s.flavors:
            family.add_metric([f.tenant, f.flavor], getattr(f, column))
        yield family
    budget = GaugeMetricFamily(
        "gpuyard_tenant_gpu_hour_budget",
        "The tenant's GPU-hour budget per period.",
        labels=["tenant", "period"],
    )
    used = GaugeMetricFamily(
        "gpuyard_tenant_gpu_hours_used",
        "GPU-hours the tenant used in the current budget period.",
        labels=["tenant", "period"],
    )
    for b in s.budgets:
        budget.add_metric([b.tenant, b.period], b.budget_gpu_hours)
        used.add_metric([b.tenant, b.period], b.used_gpu_hours)
    yield budget
    yield used


def _queues(s: ClusterSample) -> Iterator[Metric]:
    length = GaugeMetricFamily(
        "gpuyard_queue_length", "Queued jobs of the tenant.", labels=["tenant"]
    )
    oldest = GaugeMetricFamily(
        "gpuyard_queue_oldest_wait_seconds",
        "How long the tenant's longest-waiting queued job has waited.",
        labels=["tenant"],
    )
    for q in s.queues:
        length.add_metric([q.tenant], q.length)
        oldest.add_metric([q.tenant], q.oldest_wait_s)
    yield length
    yield oldest


def _nodes(s: ClusterSample) -> Iterator[Metric]:
    gauges = {
        "up": ("1 if the engine reports the node now, 0 if it was seen before but not now.", "up"),
        "schedulable": ("1 if new tasks may be placed on the node.", "schedulable"),
        "cpu_cores": ("Allocatable CPU cores of the node.", "cpu_cores"),
        "memory_bytes": ("Allocatable memory of the node.", "memory_bytes"),
        "cpu_allocated_cores": ("CPU cores held by active tasks.", "cpu_allocated_cores"),
        "memory_allocated_bytes": ("Memory held by active tasks.", "memory_allocated_bytes"),
        "scrape_up": (
            "1 if the node's agent gave its GPU and task readings for this scrape; 0: they are "
            "left out (stale).",
            "scrape_up",
        ),
    }
    for name, (text, attr) in gauges.items():
        family = GaugeMetricFamily(f"gpuyard_node_{name}", text, labels=["node"])
        for n in s.nodes:
            family.add_metric([n.name], float(getattr(n, attr)))
        yield family


def _gpus(s: ClusterSample) -> Iterator[Metric]:
    labels = ["node", "gpu", "UUID", "modelName", "fake", "job", "tenant"]
    allocated = GaugeMetricFamily(
        "gpuyard_gpu_allocated",
        "1 per job holding the GPU (a shared GPU has several); a free GPU: 0, no job.",
        labels=labels,
    )
    healthy = GaugeMetricFamily(
        "gpuyard_gpu_healthy", "1 if the node reports the GPU healthy.", labels=labels[:5]
    )
    seen: set[tuple[str, int]] = set()
    for g in s.gpus:
        base = [g.node, str(g.index), g.uuid, g.flavor, "true" if g.fake else "false"]
        allocated.add_metric([*base, g.job, g.tenant], 1 if g.job else 0)
        if (g.node, g.index) not in seen:
            seen.add((g.node, g.index))
            healthy.add_metric(base, 1 if g.healthy else 0)
    yield allocated
    yield healthy


def _tasks(s: ClusterSample) -> Iterator[Metric]:
    labels = ["job", "tenant", "task", "node"]
    cpu = CounterMetricFamily(
        "gpuyard_task_cpu_seconds", "CPU time used by the task (its cgroup).", labels=labels
    )
    memory = GaugeMetricFamily(
        "gpuyard_task_memory_bytes", "Memory the task uses now (its cgroup).", labels=labels
    )
    for t in s.tasks:
        key = [t.job, t.tenant, t.task, t.node]
        cpu.add_metric(key, t.cpu_seconds)
        memory.add_metric(key, t.memory_bytes)
    yield cpu
    yield memory


def _idle(s: ClusterSample) -> Metric:
    family = GaugeMetricFamily(
        "gpuyard_job_idle_gpu",
        "1 for a running job whose GPUs have all stayed idle for its tenant's window.",
        labels=["job", "tenant"],
    )
    for job, tenant in sorted(s.idle_jobs.items()):
        family.add_metric([job, tenant], 1)
    return family


def _preemptions(s: ClusterSample) -> Iterator[Metric]:
    total = CounterMetricFamily(
        "gpuyard_job_preemptions",
        "Times the tenant's jobs were preempted (stopped and requeued, not counted as a retry).",
        labels=["tenant"],
    )
    for tenant, n in sorted(s.preemptions.items()):
        total.add_metric([tenant], n)
    yield total
    per_job = GaugeMetricFamily(
        "gpuyard_job_preempted_times",
        "Times a queued or running job was preempted so far (jobs preempted at least once).",
        labels=["job", "tenant"],
    )
    for (job, tenant), n in sorted(s.job_preemptions.items()):
        per_job.add_metric([job, tenant], n)
    yield per_job
