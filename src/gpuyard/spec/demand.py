"""A job spec in the scheduler's terms: one `TaskDemand` per task instance."""

from __future__ import annotations

from gpuyard.model import GpuShare, JobDemand, Resources, TaskDemand
from gpuyard.spec.models import JobSpec, TaskRoleSpec


def gpu_share(role: TaskRoleSpec) -> GpuShare | None:
    """The role's share of one GPU (gpuMemoryMB or a fractional gpuNumber); None if none."""
    if not role.shares_gpu:
        return None
    fraction = role.gpu_fraction
    return GpuShare(
        memory_mb=role.gpu_memory_mb or 0,
        milli=round(fraction * 1000) if fraction is not None else 0,
        compute_percent=role.gpu_compute_percent,
    )


def job_demand(spec: JobSpec, job_id: str, seq: int) -> JobDemand:
    """Tasks in the spec's role order, indexed from 0 within each role. A role without
    GPUs asks for no GPU type (its gpuType, if any, has nothing to select)."""
    tasks = tuple(
        TaskDemand(
            role=name,
            index=index,
            resources=Resources.of(role.cpu_number, role.memory_mb, role.whole_gpus),
            gpu_type=role.gpu_type if role.gpu_number > 0 or role.shares_gpu else None,
            gpu_share=gpu_share(role),
        )
        for name, role in spec.task_roles.items()
        for index in range(role.task_number)
    )
    return JobDemand(
        job_id=job_id,
        tenant=spec.tenant,
        priority=spec.priority,
        seq=seq,
        tasks=tasks,
        priority_class=spec.priority_class,
        gang=spec.gang,
    )
