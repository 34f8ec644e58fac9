"""Small builders for table-driven tests: nodes, jobs and placements in one line each."""

from __future__ import annotations

from gpuyard.model import (
    FlavorQuota,
    GpuDevice,
    GpuShare,
    JobDemand,
    Node,
    PriorityClass,
    Resources,
    RunningJob,
    TaskDemand,
    TaskPlacement,
    Tenant,
)


def make_node(
    name: str = "n1",
    gpus: int = 4,
    gpu_type: str = "A100-80GB",
    cpu: float = 32,
    memory_mb: int = 256_000,
    groups: int = 1,
) -> Node:
    """A node of `gpus` fake GPUs; `groups` > 1 splits them into that many NVLink groups."""
    per_group = max(1, gpus // max(1, groups))
    devs = tuple(
        GpuDevice(
            i,
            f"GPU-fake-{name}-{i}",
            gpu_type,
            81920,
            fake=True,
            topology_group=i // per_group if groups > 1 else None,
        )
        for i in range(gpus)
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
    owner: str | None = None,
    submitted_at: float | None = None,
    attained_gpu_s: float = 0.0,
    max_runtime_s: int | None = None,
    priority_class: PriorityClass = PriorityClass.NORMAL,
    gang: bool = True,
    remainder: bool = False,
    first_index: int = 0,
) -> JobDemand:
    """`gang=False`: OpenPAI's gangAllocation false; `remainder`: the tasks from
    `first_index` on of such a job that runs already (docs/scheduler.md)."""
    demands = tuple(
        TaskDemand(role, i, Resources.of(cpu, memory_mb, gpus), gpu_type)
        for i in range(first_index, first_index + tasks)
    )
    order = seq if seq is not None else int("".join(c for c in job_id if c.isdigit()) or 0)
    return JobDemand(
        job_id,
        tenant,
        priority,
        order,
        demands,
        owner=owner,
        submitted_at=float(order) if submitted_at is None else submitted_at,
        attained_gpu_s=attained_gpu_s,
        max_runtime_s=max_runtime_s,
        priority_class=priority_class,
        gang=gang,
        remainder=remainder,
    )


def held(node: str, *gpu_indices: int, cpu: float = 1, memory_mb: int = 1024) -> TaskPlacement:
    return TaskPlacement(
        "worker", 0, node, tuple(gpu_indices), Resources.of(cpu, memory_mb, len(gpu_indices))
    )


def make_tenant(
    name: str,
    gpus: int = 0,
    flavor: str = "A100-80GB",
    borrowing_limit: int | None = None,
    lending_limit: int | None = None,
    **settings,
) -> Tenant:
    """A tenant guaranteed `gpus` GPUs of `flavor`; `settings` are other `Tenant` fields."""
    quotas = (
        (FlavorQuota(flavor, gpus, borrowing_limit, lending_limit),)
        if gpus or borrowing_limit is not None or lending_limit is not None
        else ()
    )
    return Tenant(name, quotas=quotas, **settings)


def make_running(
    job_id: str,
    tenant: str,
    node: str,
    *gpu_indices: int,
    borrowed: int = 0,
    flavor: str = "A100-80GB",
    priority: int = 0,
    started_at: float = 0.0,
    max_runtime_s: int | None = None,
    owner: str | None = None,
    terminating: bool = False,
    cpu: float = 1,
    memory_mb: int = 1024,
    priority_class: PriorityClass = PriorityClass.NORMAL,
) -> RunningJob:
    """A one-task running job on `node` holding `gpu_indices`, borrowing `borrowed` GPUs."""
    return RunningJob(
        job_id,
        tenant,
        (held(node, *gpu_indices, cpu=cpu, memory_mb=memory_mb),),
        started_at,
        priority=priority,
        owner=owner,
        borrowed=((flavor, borrowed),) if borrowed else (),
        max_runtime_s=max_runtime_s,
        terminating=terminating,
        priority_class=priority_class,
    )


def make_shared_job(
    job_id: str,
    memory_mb: int = 0,
    milli: int = 0,
    tasks: int = 1,
    tenant: str = "default",
    gpu_type: str | None = None,
    compute_percent: int | None = None,
    seq: int | None = None,
) -> JobDemand:
    """A job of `tasks` shared-GPU tasks, each asking `memory_mb` MB or `milli`/1000 of a GPU."""
    share = GpuShare(memory_mb, milli, compute_percent)
    job = make_job(job_id, gpus=0, tasks=tasks, tenant=tenant, gpu_type=gpu_type, seq=seq)
    demands = tuple(
        TaskDemand(t.role, t.index, t.resources, gpu_type, share) for t in job.tasks
    )
    return JobDemand(
        job.job_id, job.tenant, job.priority, job.seq, demands, submitted_at=job.submitted_at
    )


def shared(node: str, gpu: int, memory_mb: int, index: int = 0) -> TaskPlacement:
    """A shared task holding `memory_mb` of GPU `gpu` on `node`."""
    return TaskPlacement("worker", index, node, (gpu,), Resources.of(1, 1024, 0), memory_mb)


def make_shared_running(
    job_id: str, tenant: str, node: str, gpu: int, memory_mb: int, borrowed: int = 0
) -> RunningJob:
    """A one-task running job holding `memory_mb` of GPU `gpu` on `node` in shared mode."""
    borrowed_keys = (("A100-80GB/MB", borrowed),) if borrowed else ()
    return RunningJob(
        job_id, tenant, (shared(node, gpu, memory_mb),), 0.0, borrowed=borrowed_keys
    )
