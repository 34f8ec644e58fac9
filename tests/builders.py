"""Small builders for table-driven tests: nodes, jobs and placements in one line each."""

from __future__ import annotations

from gpuyard.model import GpuDevice, JobDemand, Node, Resources, TaskDemand, TaskPlacement


def make_node(
    name: str = "n1",
    gpus: int = 4,
    gpu_type: str = "A100-80GB",
    cpu: float = 32,
    memory_mb: int = 256_000,
) -> Node:
    devs = tuple(
        GpuDevice(i, f"GPU-fake-{name}-{i}", gpu_type, 81920, fake=True) for i in range(gpus)
    )
    return Node(name, round(cpu * 1000), memory_mb, devs)


def make_job(
    job_id: str,
    gpus: int = 1,
    tasks: int = 1,
    priority: int = 0,
    seq: int | None = None,
    cpu: float = 1,
    memory_mb: int = 1024,
    gpu_type: str | None = None,
    tenant: str = "default",
    role: str = "worker",
) -> JobDemand:
    demands = tuple(
        TaskDemand(role, i, Resources.of(cpu, memory_mb, gpus), gpu_type) for i in range(tasks)
    )
    order = seq if seq is not None else int("".join(c for c in job_id if c.isdigit()) or 0)
    return JobDemand(job_id, tenant, priority, order, demands)


def held(node: str, *gpu_indices: int, cpu: float = 1, memory_mb: int = 1024) -> TaskPlacement:
    return TaskPlacement(
        "worker", 0, node, tuple(gpu_indices), Resources.of(cpu, memory_mb, len(gpu_indices))
    )
