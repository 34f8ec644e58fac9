"""A job's ssh keys (OpenPAI's ssh plugin, `JobSpec.ssh`): derived, never stored.

Every task of a job attempt gets the same host key and the same user key pair, on whichever
node it runs, and a server that restarts gives a late task the same ones: each is an Ed25519
seed derived from the store's secrets key (`SecretBox.derive`: HMAC-SHA256 of
`ssh/<host|user>/<job id>/<attempt>`). Another job, another attempt or another secrets key
gives unrelated keys; without `<data dir>/secrets.key` nobody can compute them. The seeds go
to the node only in the task's launch (launch.json, 0600), as secrets do.
"""

from __future__ import annotations

import base64
import dataclasses

from gpuyard.runtime.sshd import public_line
from gpuyard.runtime.types import SshLaunch, TaskLaunch
from gpuyard.spec import JobSpec
from gpuyard.store.secrets import SecretBox


def _seed(secrets: SecretBox, kind: str, job_id: str, attempt: int) -> str:
    return base64.b64encode(secrets.derive(f"ssh/{kind}/{job_id}/{attempt}")).decode()


def ssh_launch(spec: JobSpec, job_id: str, attempt: int, secrets: SecretBox) -> SshLaunch | None:
    """The task's sshd settings and keys; None for a job without `ssh`."""
    ssh = spec.ssh
    if ssh is None:
        return None
    return SshLaunch(
        host_seed=_seed(secrets, "host", job_id, attempt),
        job_seed=_seed(secrets, "user", job_id, attempt) if ssh.job_keys else "",
        authorized_keys=ssh.authorized_keys,
        roles=ssh.roles,
        barrier_s=ssh.barrier_timeout_s if ssh.barrier else 0,
        required=ssh.required,
    )


def host_public_key(secrets: SecretBox, job_id: str, attempt: int) -> str:
    """The OpenSSH public host key of a job attempt's tasks (what `gpuyard ssh` checks)."""
    return public_line(_seed(secrets, "host", job_id, attempt))


def with_ssh(launch: TaskLaunch, spec: JobSpec, secrets: SecretBox) -> TaskLaunch:
    """`launch` with its job's ssh settings (unchanged for a job without `ssh`)."""
    ssh = ssh_launch(spec, launch.job_id, launch.attempt, secrets)
    return launch if ssh is None else dataclasses.replace(launch, ssh=ssh)
