"""Our job format (camelCase YAML/JSON) → `JobSpec`, reporting every bad field at once.

Each level is a table of (key, attribute, reader, default); `read_fields` walks it, so the
table is the one list of what a level accepts. Unknown keys are errors, with a suggestion.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuyard.model import PriorityClass
from gpuyard.spec import limits
from gpuyard.spec.arrays import read_after
from gpuyard.spec.distributed import NEVER, check_min_tasks, read_min_tasks, read_ports
from gpuyard.spec.errors import Errors, got, join, unknown_field
from gpuyard.spec.fields import (
    Reader,
    pattern,
    read_command,
    read_cpu,
    read_duration,
    read_env,
    read_flag,
    read_gpu_memory,
    read_gpu_number,
    read_host_path,
    read_image,
    read_memory,
    read_priority_class,
    read_webhook,
    whole,
)
from gpuyard.spec.models import JobSpec, TaskRoleSpec
from gpuyard.spec.runtimeplugins import check_ssh_roles, read_ssh
from gpuyard.spec.services import check_service_tasks, read_services
from gpuyard.spec.storage import read_storage


@dataclass(frozen=True, slots=True)
class Required:
    """Marks a field without a default; `what` tells the user what to put there."""

    what: str


Row = tuple[str, str, Reader, object]

_TASK_ROLES_WHAT = "at least one task role, like taskRoles: {worker: {command: ...}}"

ROLE_TABLE: tuple[Row, ...] = (
    ("taskNumber", "task_number", whole(*limits.TASK_NUMBER), limits.DEFAULT_TASK_NUMBER),
    ("cpuNumber", "cpu_number", read_cpu, limits.DEFAULT_CPU_NUMBER),
    ("memoryMB", "memory_mb", read_memory, limits.DEFAULT_MEMORY_MB),
    ("gpuNumber", "gpu_number", read_gpu_number, limits.DEFAULT_GPU_NUMBER),
    ("gpuType", "gpu_type", pattern(limits.GPU_TYPE_RE, limits.GPU_TYPE_RULE), None),
    ("gpuMemoryMB", "gpu_memory_mb", read_gpu_memory, None),
    (
        "gpuComputePercent",
        "gpu_compute_percent",
        whole(*limits.GPU_COMPUTE_PERCENT, "a whole number from 1 to 100 (percent)"),
        None,
    ),
    ("ports", "ports", read_ports, ()),
    ("minFailedTasks", "min_failed", read_min_tasks, 1),
    ("minSucceededTasks", "min_succeeded", read_min_tasks, NEVER),
    ("image", "image", read_image, None),
    ("command", "command", read_command, Required("the shell command each task runs")),
)

# OpenPAI words used without `protocolVersion: 2`: say what they are called here
_OPENPAI_WORDS = {
    "jobRetryCount": "retryCount",
    "instances": "taskNumber",
    "resourcePerInstance": "cpuNumber, memoryMB and gpuNumber",
    "dockerImage": "image",
    "commands": "command",
    "prerequisites": "image",
    "completion": "minFailedTasks and minSucceededTasks",
}


# words people write for our fields
_SYNONYMS = {
    "gpu": "gpuNumber",
    "gpuMemory": "gpuMemoryMB",
    "gpuMem": "gpuMemoryMB",
    "gpus": "gpuNumber",
    "cpu": "cpuNumber",
    "cpus": "cpuNumber",
    "memory": "memoryMB",
    "mem": "memoryMB",
    "replicas": "taskNumber",
    "tasks": "taskNumber",
    "roles": "taskRoles",
    "cmd": "command",
    "timeout": "maxRuntime",
    "retries": "retryCount",
    "minFailedInstances": "minFailedTasks",
    "minSucceededInstances": "minSucceededTasks",
    "queue": "tenant",
    "virtualCluster": "tenant",
}


def read_fields(errs: Errors, doc: dict[Any, Any], path: str, table: tuple[Row, ...]) -> dict:
    """Check `doc` against `table`: unknown keys, required keys, each value's reader."""
    known = [row[0] for row in table]
    for key in doc:
        if key not in known:
            errs.add(join(path, key), _unknown(key, known))
    out: dict[str, Any] = {}
    for key, attr, reader, default in table:
        value = doc.get(key)
        where = join(path, key)
        if value is not None:
            out[attr] = reader(errs, where, value)
        elif isinstance(default, Required):
            errs.add(where, f"is required: {default.what}")
        else:
            out[attr] = default
    return out


def _unknown(key: object, known: list[str]) -> str:
    if key == "jobName":
        return "unknown field; OpenPAI v1 job configs are not supported, use protocolVersion: 2"
    if key in _OPENPAI_WORDS:
        return (
            f"unknown field; here it is '{_OPENPAI_WORDS[key]}'"
            " (or add protocolVersion: 2 for an OpenPAI spec)"
        )
    if _SYNONYMS.get(str(key)) in known:
        return f"unknown field; did you mean '{_SYNONYMS[str(key)]}'?"
    return unknown_field(key, known)


def read_role(errs: Errors, path: str, value: object) -> TaskRoleSpec | None:
    if not isinstance(value, dict):
        errs.add(path, f"must be a mapping with command, taskNumber, cpuNumber, ...{got(value)}")
        return None
    before = len(errs.items)
    fields = read_fields(errs, value, path, ROLE_TABLE)
    if len(errs.items) == before:
        _check_gpu_share(errs, path, fields)
        check_min_tasks(errs, path, fields)
    return TaskRoleSpec(**fields) if len(errs.items) == before else None


def _check_gpu_share(errs: Errors, path: str, fields: dict[str, Any]) -> None:
    """A task takes whole GPUs or a share of one GPU, never both; a compute share needs a
    memory share."""
    gpus, memory = fields["gpu_number"], fields["gpu_memory_mb"]
    if memory is not None and gpus:
        what = "a fraction of one GPU" if isinstance(gpus, float) else f"{gpus} whole GPU(s)"
        errs.add(
            join(path, "gpuMemoryMB"),
            f"cannot be combined with gpuNumber: {gpus} ({what}); a task takes whole GPUs or a "
            "share of one GPU: give gpuMemoryMB alone, or gpuNumber alone",
        )
    shared = memory is not None or isinstance(gpus, float)
    if fields["gpu_compute_percent"] is not None and not shared:
        errs.add(
            join(path, "gpuComputePercent"),
            "only applies to a shared GPU: also give gpuMemoryMB, or a fractional gpuNumber "
            "like 0.5 (a task on whole GPUs has all of their compute)",
        )


def read_roles(errs: Errors, path: str, value: object) -> dict[str, TaskRoleSpec] | None:
    if not isinstance(value, dict) or not value:
        errs.add(path, f"must be a mapping with {_TASK_ROLES_WHAT}{got(value)}")
        return None
    if len(value) > limits.MAX_ROLES:
        errs.add(path, f"must have at most {limits.MAX_ROLES} roles, got {len(value)}")
        return None
    roles: dict[str, TaskRoleSpec] = {}
    for name, body in value.items():
        where = join(path, name)
        if not isinstance(name, str) or not limits.ROLE_RE.fullmatch(name):
            errs.add(where, f"is not a valid role name: use {limits.ROLE_RULE}")
        role = read_role(errs, where, body)
        if role is not None:
            roles[str(name)] = role
    tasks = sum(r.task_number for r in roles.values())
    if tasks > limits.MAX_TASKS:
        errs.add(path, f"must have at most {limits.MAX_TASKS} tasks in all roles, got {tasks}")
    return roles


JOB_TABLE: tuple[Row, ...] = (
    ("name", "name", pattern(limits.NAME_RE, limits.NAME_RULE), Required("the job's name")),
    ("image", "image", read_image, None),
    ("dataDir", "data_dir", read_host_path, None),
    ("outputDir", "output_dir", read_host_path, None),
    ("env", "env", read_env, {}),
    ("retryCount", "retry_count", whole(*limits.RETRY_COUNT), 0),
    ("priority", "priority", whole(*limits.PRIORITY, "a whole number from -1000 to 1000"), 0),
    ("priorityClass", "priority_class", read_priority_class, PriorityClass.NORMAL),
    ("tenant", "tenant", pattern(limits.TENANT_RE, limits.NAME_RULE), limits.DEFAULT_TENANT),
    ("maxRuntime", "max_runtime_s", read_duration, None),
    ("webhook", "webhook", read_webhook, None),
    ("hostNetwork", "host_network", read_flag, False),
    ("after", "after", read_after, None),
    ("ssh", "ssh", read_ssh, None),
    ("services", "services", read_services, ()),
    ("interactive", "interactive", read_flag, False),
    ("storage", "storage", read_storage, ()),
    ("gang", "gang", read_flag, True),
    ("taskRoles", "task_roles", read_roles, Required(_TASK_ROLES_WHAT)),
)


def parse_ours(doc: dict[Any, Any], errs: Errors | None = None) -> JobSpec:
    """Validate a document in our format; raise `SpecError` listing every problem."""
    errs = errs if errs is not None else Errors()
    fields = read_fields(errs, doc, "", JOB_TABLE)
    check_ssh_roles(errs, fields.get("ssh"), fields.get("task_roles"))
    check_service_tasks(errs, fields.get("services"), fields.get("task_roles"))
    check_interactive(errs, fields)
    errs.raise_if_any()
    return JobSpec(**fields)


def check_interactive(errs: Errors, fields: dict[str, Any]) -> None:
    """An interactive job is not retried: a new attempt would have no session attached to
    it (docs/interactive.md)."""
    if fields.get("interactive") and fields.get("retry_count"):
        errs.add(
            "retryCount",
            f"must be 0 for an interactive job, got {fields['retry_count']}: it ends with its "
            "session, and a new attempt would have nobody attached",
        )
