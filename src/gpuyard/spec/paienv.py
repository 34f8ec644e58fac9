"""OpenPAI's job- and role-level task variables, from the spec (rest-server's runtime env).

Every task of every job gets them (not only OpenPAI jobs: a script written for OpenPAI reads
them whatever the spec's format):

- `PAI_USER_NAME` (and the older `PAI_USERNAME`): the job's owner; `PAI_VIRTUAL_CLUSTER`: its
  tenant; `PAI_DEFAULT_FS_URI`: empty, as on an OpenPAI cluster without one.
- `PAI_RESOURCE_<role>`: `gpu,cpu,memoryMB,shmMB` of one task of the role (`shmMB` is the size
  of the task's /dev/shm here: its memory, at least 64 MB, runtime/oci.py).
- `PAI_MIN_FAILED_TASK_COUNT_<role>`: the role's minFailedTasks (-1: no count fails the job);
  `PAI_MIN_SUCCEEDED_TASK_COUNT_<role>`: its minSucceededTasks, or its task count when every
  task must end (OpenPAI's default).
- `PAI_TASKS_NUM`, `PAI_JOB_TASK_COUNT`, `PAI_TASK_ROLES_NUM`, `PAI_JOB_TASK_ROLE_COUNT`,
  `PAI_JOB_TASK_ROLE_LIST`: OpenPAI's older names for the job's task and role counts.

Variables that depend on where the tasks run (host lists, ports) are the node's to set
(runtime/env.py).
"""

from __future__ import annotations

from gpuyard.spec.models import JobSpec, TaskRoleSpec

SHM_MIN_MB = 64  # a task's /dev/shm: max(64, memoryMB) MB (runtime/oci.py)


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def resource_text(role: TaskRoleSpec) -> str:
    """`gpu,cpu,memoryMB,shmMB` as OpenPAI writes PAI_RESOURCE_<role>."""
    shm = max(SHM_MIN_MB, role.memory_mb)
    return ",".join(
        [_number(role.gpu_number), _number(role.cpu_number), str(role.memory_mb), str(shm)]
    )


def _role_env(name: str, role: TaskRoleSpec) -> dict[str, str]:
    succeeded = role.min_succeeded if role.min_succeeded >= 1 else role.task_number
    return {
        f"PAI_RESOURCE_{name}": resource_text(role),
        f"PAI_MIN_FAILED_TASK_COUNT_{name}": str(role.min_failed),
        f"PAI_MIN_SUCCEEDED_TASK_COUNT_{name}": str(succeeded),
    }


def job_env(spec: JobSpec, user: str | None) -> dict[str, str]:
    """The OpenPAI variables that the spec (and its owner) decide, for every task."""
    roles = list(spec.task_roles)
    env = {
        "PAI_USER_NAME": user or "",
        "PAI_USERNAME": user or "",
        "PAI_VIRTUAL_CLUSTER": spec.tenant,
        "PAI_DEFAULT_FS_URI": "",
        "PAI_TASKS_NUM": str(spec.task_count),
        "PAI_JOB_TASK_COUNT": str(spec.task_count),
        "PAI_TASK_ROLES_NUM": str(len(roles)),
        "PAI_JOB_TASK_ROLE_COUNT": str(len(roles)),
        "PAI_JOB_TASK_ROLE_LIST": ",".join(roles),
    }
    for name, role in spec.task_roles.items():
        env.update(_role_env(name, role))
    return env
