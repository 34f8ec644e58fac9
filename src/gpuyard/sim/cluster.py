"""The simulated cluster of a trace: nodes of 8 fake GPUs per quota node, one tenant per
trace tenant with its guarantee, and the job demands (gangs of 8-GPU tasks above 8 GPUs)."""

from __future__ import annotations

from functools import lru_cache

from gpuyard.model import (
    FlavorQuota,
    GpuDevice,
    JobDemand,
    Node,
    QueuePolicy,
    Resources,
    TaskDemand,
    Tenant,
)
from gpuyard.sim.traces import Trace, TraceJob

NODE_CPU_MILLI = 64_000
NODE_MEMORY_MB = 512_000


def build_nodes(trace: Trace) -> tuple[Node, ...]:
    """As many nodes of each GPU type as the tenants' quotas of it add up to."""
    per_flavor: dict[str, int] = {}
    for (_, flavor), n in sorted(trace.quota_nodes.items()):
        per_flavor[flavor] = per_flavor.get(flavor, 0) + n
    nodes = []
    for flavor, count in sorted(per_flavor.items()):
        for i in range(count):
            name = f"{flavor.lower()}-{i:04d}"
            gpus = tuple(
                GpuDevice(g, f"GPU-sim-{name}-{g}", flavor, 81920, fake=True)
                for g in range(trace.gpus_per_node)
            )
            nodes.append(Node(name, NODE_CPU_MILLI, NODE_MEMORY_MB, gpus))
    return tuple(nodes)


def build_tenants(trace: Trace, queue: QueuePolicy, grace_s: int) -> dict[str, Tenant]:
    quotas: dict[str, list[FlavorQuota]] = {}
    for (tenant, flavor), _ in sorted(trace.quota_nodes.items()):
        quotas.setdefault(tenant, []).append(FlavorQuota(flavor, trace.quota_gpus(tenant, flavor)))
    names = sorted(set(quotas) | set(trace.tenants))
    return {
        name: Tenant(
            name,
            quotas=tuple(quotas.get(name, ())),
            queue_policy=queue,
            preemption_grace_s=grace_s,
        )
        for name in names
    }


@lru_cache(maxsize=256)
def gang(gpus: int, gpu_type: str, per_node: int) -> tuple[TaskDemand, ...]:
    """`gpus` as tasks of at most `per_node` GPUs each (a gang when more than one)."""
    sizes = [per_node] * (gpus // per_node) + ([gpus % per_node] if gpus % per_node else [])
    return tuple(
        TaskDemand("worker", i, Resources(0, 0, n), gpu_type) for i, n in enumerate(sizes or [0])
    )


def demand(
    job: TraceJob,
    seq: int,
    per_node: int,
    queued_at: float,
    attained_gpu_s: float,
    remaining_s: float,
    expected_s: float | None = None,
    preemptions: int = 0,
) -> JobDemand:
    return JobDemand(
        job.job_id,
        job.tenant,
        0,
        seq,
        gang(job.gpus, job.gpu_type, per_node),
        submitted_at=queued_at,
        attained_gpu_s=attained_gpu_s,
        oracle_duration_s=remaining_s,
        expected_runtime_s=expected_s,
        preemptions=preemptions,
    )
