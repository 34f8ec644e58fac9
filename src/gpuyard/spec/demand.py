"""A job spec in the scheduler's terms: one `TaskDemand` per task instance."""

from __future__ import annotations

from gpuyard.model import JobDemand, Resources, TaskDemand
from gpuyard.spec.models import JobSpec


def job_demand(spec: JobSpec, job_id: str, seq: int) -> JobDemand:
    """Tasks in the spec's role order, indexed from 0 within each role. A role without
    GPUs asks for no GPU type (its gpuType, if any, has nothing to select)."""
    tasks = tuple(
        TaskDemand(
            role=name,
            index=index,
            resources=Resources.of(role.cpu_number, role.memory_mb, role.gpu_number),
            gpu_type=role.gpu_type if role.gpu_number > 0 else None,
        )
        for name, role in spec.task_roles.items()
        for index in range(role.task_number)
    )
    return JobDemand(
        job_id=job_id, tenant=spec.tenant, priority=spec.priority, seq=seq, tasks=tasks
    )
