"""`GET /api/v1/jobs/{id}/ssh`: what `gpuyard ssh` needs to check a task's sshd strictly
(its host key, login and port), for whoever may exec in the job (docs/exec.md, *gpuyard
ssh*). The bytes themselves go over the port-forward socket (`port: "ssh"`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from gpuyard.api.auth import CallerDep
from gpuyard.api.deps import ControllerDep
from gpuyard.api.schemas import error_responses
from gpuyard.api.schemas.sessions import TASK_PATTERN
from gpuyard.api.schemas.ssh import SshOut
from gpuyard.api.services.sshaccess import ssh_target

router = APIRouter(
    prefix="/api/v1/jobs", tags=["sessions"], responses=error_responses(401, 403, 404, 409, 422)
)


@router.get("/{job_id}/ssh", response_model=SshOut)
def job_ssh(
    job_id: str,
    ctl: ControllerDep,
    caller: CallerDep,
    task: Annotated[str | None, Query(pattern=TASK_PATTERN)] = None,
) -> SshOut:
    """The task's sshd (default: the job's first task): its host key, login and port. The
    job's owner, its tenant's admins and platform admins (as exec); 409 while the task is
    not running or runs no sshd."""
    target = ssh_target(ctl, caller, job_id, task)
    return SshOut(task=target.task, user=target.user, port=target.port, host_key=target.host_key)
