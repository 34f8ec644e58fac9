"""OpenPAI REST v2 bodies: gpuyard's jobs and tasks in the shapes OpenPAI's rest-server answers.

OpenPAI names a job `user~name` (its framework name), gives times in milliseconds since the
epoch, and has its own state words; these functions turn store records into those shapes
(docs/openpai.md, *REST API v2*). The states are two tables, `JOB_STATES` and `TASK_STATES`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from gpuyard.api.schemas.jobs import spec_gpus
from gpuyard.model import JobState, TaskState
from gpuyard.store import JobRecord, TaskRecord

#: gpuyard's job state → (OpenPAI's state, its framework sub-state)
JOB_STATES: dict[JobState, tuple[str, str]] = {
    JobState.QUEUED: ("WAITING", "AttemptCreationPending"),
    JobState.SCHEDULED: ("WAITING", "AttemptPreparing"),
    JobState.RUNNING: ("RUNNING", "AttemptRunning"),
    JobState.SUCCEEDED: ("SUCCEEDED", "Completed"),
    JobState.FAILED: ("FAILED", "Completed"),
    JobState.STOPPED: ("STOPPED", "Completed"),
}
#: a live job whose stop was asked for (`Cancelled`): being stopped
STOPPING = ("STOPPING", "AttemptDeletionRequested")
#: gpuyard's task state → OpenPAI's task state
TASK_STATES: dict[TaskState, str] = {
    TaskState.PENDING: "WAITING",
    TaskState.STARTING: "WAITING",
    TaskState.RUNNING: "RUNNING",
    TaskState.SUCCEEDED: "SUCCEEDED",
    TaskState.FAILED: "FAILED",
    TaskState.STOPPED: "STOPPED",
}
#: OpenPAI's state word → the gpuyard states it stands for (`?state=` of the job list)
STATE_FILTER: dict[str, tuple[str, ...]] = {
    "WAITING": ("QUEUED", "SCHEDULED"),
    "RUNNING": ("RUNNING",),
    "STOPPING": ("QUEUED", "SCHEDULED", "RUNNING"),
    "SUCCEEDED": ("SUCCEEDED",),
    "FAILED": ("FAILED",),
    "STOPPED": ("STOPPED",),
    "UNKNOWN": (),
}
API = "/rest-server/api/v2"


def framework_name(job: JobRecord) -> str:
    """`user~name`, as OpenPAI addresses a job."""
    return f"{job.owner}~{job.name}"


def ms(t: float | None) -> int | None:
    """A time as OpenPAI gives it: whole milliseconds since the epoch."""
    return None if t is None else int(t * 1000)


def job_state(job: JobRecord) -> tuple[str, str]:
    """OpenPAI's (state, subState) of `job`."""
    if job.stop_requested == "Cancelled" and not job.state.is_final:
        return STOPPING
    return JOB_STATES[job.state]


def execution_type(job: JobRecord) -> str:
    stopped = job.state == JobState.STOPPED or job.stop_requested == "Cancelled"
    return "STOP" if stopped else "START"


def _roles(job: JobRecord) -> dict[str, Any]:
    roles = job.spec.get("taskRoles")
    return roles if isinstance(roles, dict) else {}


def _task_count(job: JobRecord) -> int:
    return sum(int(r.get("taskNumber", 1)) for r in _roles(job).values())


def _exit_code(job: JobRecord, tasks: list[TaskRecord]) -> int | None:
    if job.state == JobState.SUCCEEDED:
        return 0
    codes = [t.exit_code for t in tasks if t.state == TaskState.FAILED and t.exit_code is not None]
    return codes[0] if codes else None


def _retry_details(job: JobRecord) -> dict[str, int]:
    retries = max(0, job.attempt - 1)
    platform = max(0, retries - job.retries_used - job.preemptions)
    return {"user": job.retries_used, "platform": platform, "resource": job.preemptions}


def _status(job: JobRecord) -> dict[str, Any]:
    """What the list's items and a job's `jobStatus` both say."""
    state, sub_state = job_state(job)
    return {
        "username": job.owner,
        "state": state,
        "subState": sub_state,
        "executionType": execution_type(job),
        "retries": max(0, job.attempt - 1),
        "retryDetails": _retry_details(job),
        "retryDelayTime": None,
        "createdTime": ms(job.submitted_at),
        "completedTime": ms(job.finished_at),
        "virtualCluster": job.tenant,
    }


def job_summary(job: JobRecord) -> dict[str, Any]:
    """One item of `GET /rest-server/api/v2/jobs` (its exit code only for a success: the
    list reads no tasks)."""
    return {
        "name": job.name,
        "frameworkName": framework_name(job),
        **_status(job),
        "submissionTime": ms(job.submitted_at),
        "launchTime": ms(job.started_at),
        "appExitCode": 0 if job.state == JobState.SUCCEEDED else None,
        "totalGpuNumber": spec_gpus(job.spec),
        "totalTaskNumber": _task_count(job),
        "totalTaskRoleNumber": len(_roles(job)),
        "debugId": job.id,
    }


def job_detail(job: JobRecord, tasks: list[TaskRecord], diagnostics: bool) -> dict[str, Any]:
    """`GET /rest-server/api/v2/jobs/{user}~{name}`: the job's status and its latest
    attempt's tasks by role (tasks not placed yet are WAITING). The exit diagnostics (a failed
    task's message ends with the last lines of its log) only with `diagnostics`: for whoever
    may read the job's logs; null for everyone else."""
    latest = [t for t in tasks if t.attempt == job.attempt]
    message = job.message if diagnostics else None
    status = _status(job) | {
        "appId": job.id,
        "appLaunchedTime": ms(job.started_at),
        "appCompletedTime": ms(job.finished_at),
        "appExitCode": _exit_code(job, latest),
        "appExitType": job.reason,
        "appExitDiagnostics": message,
        "appExitTriggerMessage": message,
        "jobAttemptId": job.attempt - 1,
    }
    return {
        "name": job.name,
        "frameworkName": framework_name(job),
        "debugId": job.id,
        "jobStatus": status,
        "taskRoles": {
            role: _role_status(job, role, spec, latest, diagnostics)
            for role, spec in _roles(job).items()
        },
    }


def _role_status(
    job: JobRecord, role: str, spec: dict[str, Any], tasks: list[TaskRecord], diagnostics: bool
) -> dict[str, Any]:
    by_index = {t.index: t for t in tasks if t.role == role}
    count = int(spec.get("taskNumber", 1))
    statuses = [_task_status(job, role, i, by_index.get(i), diagnostics) for i in range(count)]
    return {"taskRoleStatus": {"name": role}, "taskStatuses": statuses}


def log_list_path(job: JobRecord, role: str, index: int) -> str:
    """Where OpenPAI's clients ask for a task's logs (the latest attempt's)."""
    return (
        f"{API}/jobs/{framework_name(job)}/attempts/{job.attempt - 1}/taskRoles/{role}"
        f"/taskIndex/{index}/attempts/0/logs"
    )


def _task_status(
    job: JobRecord, role: str, index: int, task: TaskRecord | None, diagnostics: bool
) -> dict[str, Any]:
    status: dict[str, Any] = {
        "taskIndex": index,
        "taskState": TASK_STATES[task.state] if task else "WAITING",
        "retries": 0,
        "accountableRetries": 0,
        "containerLog": log_list_path(job, role, index),
    }
    if task is None:
        return status | {"containerId": None, "containerIp": None, "containerNodeName": None}
    return status | {
        "containerId": task.key,
        "containerIp": None,
        "containerNodeName": task.node or None,
        "containerGpus": ",".join(str(g) for g in task.gpus) or None,
        "containerExitCode": task.exit_code,
        "containerExitDiagnostics": task.message if diagnostics else None,
        "containerExitType": task.reason,
        "createdTime": ms(task.started_at),
        "completedTime": ms(task.finished_at),
        "currentAttemptLaunchedTime": ms(task.started_at),
        "currentAttemptCompletedTime": ms(task.finished_at),
    }


def log_locations(log_url: str) -> dict[str, Any]:
    """OpenPAI's log list: one location, `all` (gpuyard keeps stdout and stderr as one
    log), also keyed by name as the webportal reads it."""
    return {"locations": [{"name": "all", "uri": log_url}], "all": log_url}


def error(code: str, message: str, **extra: Any) -> dict[str, Any]:
    """OpenPAI's error body: `{"code": "NoJobError", "message": "..."}`."""
    return {"code": code, "message": message, **extra}


class ExecutionIn(BaseModel):
    """The body of `PUT .../executionType`: `{"value": "STOP"}`."""

    value: str
