"""Turn a bound task (job spec + placement) into the `TaskLaunch` its node runs."""

from __future__ import annotations

from gpuyard.model import Node, Tenant
from gpuyard.runtime.types import TaskLaunch
from gpuyard.spec import JobSpec
from gpuyard.store import JobRecord, TaskRecord

NOBODY = (65534, 65534)


def run_as(tenant: Tenant | None) -> tuple[int, int]:
    """Tasks run as `nobody` unless their tenant allows root (or no tenants are configured)."""
    return (0, 0) if tenant is None or tenant.allow_root else NOBODY


def build_launch(
    job: JobRecord,
    spec: JobSpec,
    task: TaskRecord,
    node: Node,
    pids_limit: int,
    tenant: Tenant | None = None,
) -> TaskLaunch:
    role = spec.task_roles[task.role]
    by_index = {g.index: g for g in node.gpus}
    return TaskLaunch(
        key=task.key,
        job_id=job.id,
        job_name=spec.name,
        role=task.role,
        index=task.index,
        attempt=task.attempt,
        command=role.command,
        cpu=task.cpu_milli / 1000,
        memory_mb=task.memory_mb,
        gpus=tuple(by_index[i] for i in task.gpus),
        env=tuple(sorted(spec.env.items())),
        data_dir=spec.data_dir,
        output_dir=spec.output_dir,
        image=spec.image,
        pids_limit=pids_limit,
        resumed=task.attempt > 1,
        run_as=run_as(tenant),
        role_task_counts=tuple((name, r.task_number) for name, r in spec.task_roles.items()),
    )
