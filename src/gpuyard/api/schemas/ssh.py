"""The answer of `GET /api/v1/jobs/{id}/ssh` (`api/routers/ssh.py`)."""

from __future__ import annotations

from gpuyard.api.schemas.common import Out


class SshOut(Out):
    """What a client needs to ssh into a task through the platform: `hostKey` is the job
    attempt's public host key (OpenSSH format, for a known_hosts line: check it strictly),
    `user` the login sshd knows the task's user by, `port` the task's sshd port (a port
    stream may name it `"ssh"`)."""

    task: str
    user: str
    port: int
    host_key: str
