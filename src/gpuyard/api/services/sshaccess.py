"""ssh into a task through the platform (`gpuyard ssh`, docs/exec.md): which port its sshd
listens on, and the job's host key for the client's known_hosts.

A port stream (`WS /api/v1/jobs/{id}/portforward`) may name the port `"ssh"`: the task's own
`ssh` port (`runtime/sshd.py`, reserved for it at launch), resolved here, on the server, once
the caller has been authorised as for any port (`api/services/sessions.py`). Its sshd listens
on the task's loopback too, so the stream reaches it as any port-forward does.

`GET /api/v1/jobs/{id}/ssh` gives whoever may exec in the job (`JobAction.EXEC`) what the
client needs to check the server strictly: the job attempt's public host key (derived from
the secrets key, `controller/sshkeys.py`: never stored), the login name and the port.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuyard.api.authz import JobAction, authorize_job
from gpuyard.api.errors import Conflict
from gpuyard.api.services.jobs import get_job, pick_task
from gpuyard.controller import Controller
from gpuyard.controller.launch import run_as
from gpuyard.controller.sessions import SessionUnavailable
from gpuyard.controller.sshkeys import host_public_key
from gpuyard.model import TaskState
from gpuyard.runtime.sshd import SSH_PORT_LABEL, USER_NAME
from gpuyard.spec.errors import Errors
from gpuyard.spec.models import SshSpec
from gpuyard.spec.runtimeplugins import read_ssh
from gpuyard.store import JobRecord, TaskRecord, UserRecord

SSH_PORT = "ssh"  # the name a port stream may give instead of a number


@dataclass(frozen=True)
class SshTarget:
    """What `gpuyard ssh` needs of a task: its name, login, sshd port and the host key."""

    task: str
    user: str
    port: int
    host_key: str


def job_ssh(job: JobRecord) -> SshSpec | None:
    """The job's `ssh` (checked at submission); None for a job without sshd."""
    value = job.spec.get("ssh")
    return None if value is None else read_ssh(Errors(), "ssh", value)


def _no_sshd(job: JobRecord, task: TaskRecord, ssh: SshSpec | None) -> str | None:
    """Why the task runs no sshd (None: it does)."""
    if ssh is None:
        return (
            f"job {job.id} runs no sshd: give it `ssh:` (or OpenPAI's ssh plugin) with your "
            "public key in authorizedKeys (userssh)"
        )
    if not ssh.applies(task.role):
        return (
            f"task {task.name} of job {job.id} runs no sshd: ssh.taskRoles leaves out {task.role}"
        )
    return None


def _ssh_port(ctl: Controller, task: TaskRecord) -> int | None:
    ports = ctl.store.nodes.task_ports(task.id).get(SSH_PORT_LABEL)
    return ports[0] if ports else None


def task_port(ctl: Controller, job_id: str, task: TaskRecord, port: int | str) -> tuple[int, str]:
    """(the port number, how the job's event names it) of an authorised port stream;
    SessionUnavailable (409) for `"ssh"` of a task that runs no sshd."""
    if isinstance(port, int):
        return port, f"port {port}"
    job = get_job(ctl, job_id)
    why = _no_sshd(job, task, job_ssh(job))
    number = _ssh_port(ctl, task) if why is None else None
    if number is None:
        raise SessionUnavailable(why or f"task {task.name} of job {job_id} has no ssh port")
    return number, f"ssh (port {number})"


def login_name(ctl: Controller, job: JobRecord) -> str:
    """The task's user as sshd knows it (`runtime/sshd.py: accounts`): `root` for a tenant
    whose tasks run as root, else `task` (an image that names the tenant's uid itself is
    the exception: `gpuyard ssh -l NAME`)."""
    record = ctl.store.tenants.get(job.tenant)
    uid, _ = run_as(record.tenant if record is not None else None)
    return "root" if uid == 0 else USER_NAME


def ssh_target(ctl: Controller, caller: UserRecord, job_id: str, task: str | None) -> SshTarget:
    """Authorise as exec (404 for a job the caller cannot see, 403 for a viewer or another
    member), then the running task's sshd: 404 no such task, 409 not running or no sshd."""
    job = get_job(ctl, job_id)
    authorize_job(caller, job, JobAction.EXEC)
    record = pick_task(ctl, job, task, None)
    why = _no_sshd(job, record, job_ssh(job))
    if why is not None:
        raise Conflict(why)
    if record.state != TaskState.RUNNING:
        state = str(record.state).lower()
        raise Conflict(f"task {record.name} of job {job_id} is {state}, not running")
    port = _ssh_port(ctl, record)
    if port is None:
        raise Conflict(f"task {record.name} of job {job_id} has no ssh port")
    key = host_public_key(ctl.store.secrets, job.id, record.attempt)
    return SshTarget(record.name, login_name(ctl, job), port, key)
