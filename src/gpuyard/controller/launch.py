"""Turn a bound task (job spec + placement) into the `TaskLaunch` its node runs."""

from __future__ import annotations

from gpuyard.model import Node
from gpuyard.runtime.types import TaskLaunch
from gpuyard.spec import JobSpec
from gpuyard.store import JobRecord, TaskRecord


def build_launch(
    job: JobRecord, spec: JobSpec, task: TaskRecord, node: Node, pids_limit: int
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
        role_task_counts=tuple((name, r.task_number) for name, r in spec.task_roles.items()),
    )
