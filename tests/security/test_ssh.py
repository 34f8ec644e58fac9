"""The ssh plugin against a hostile tenant: another tenant's job cannot reach a job's sshd (the
network rules keep it off), its own job key would not be let in, and it cannot read the job's
keys on the node. The job's own tasks do reach each other by name, in their own namespaces."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from gpuyard.model import TaskReason
from gpuyard.runtime.executor import ContainerRuntime
from gpuyard.runtime.types import SshLaunch, TaskLaunch, TaskPeer
from runtime.conftest import container_host  # noqa: F401 - fixture
from runtime.helpers import wait_exited, wait_running
from security.test_network import node  # noqa: F401 - fixture

pytestmark = pytest.mark.container
UID_A, UID_B = (1 << 30) + 65536 * 7, (1 << 30) + 65536 * 8
SSH_PORT = 20022


def seed(n: int) -> str:
    return base64.b64encode(bytes([n]) * 32).decode()


def ssh_job(rt: ContainerRuntime, name: str, uid: int, commands: list[str], n: int) -> list:
    keys = [f"{name}-{i}-{uuid.uuid4().hex[:6]}" for i in range(len(commands))]
    addresses = rt.claim_addresses(keys)
    peers = tuple(TaskPeer("worker", i, "n", addresses[k], (("ssh", (SSH_PORT,)),))
                  for i, k in enumerate(keys))  # fmt: skip
    ssh = SshLaunch(seed(n), seed(n + 1))
    return [TaskLaunch(key=k, job_id=name, job_name=name, role="worker", index=i, attempt=1,
                       command=c, cpu=0.5, memory_mb=256, peers=peers, run_as=(uid, uid),
                       ssh=ssh) for i, (k, c) in enumerate(zip(keys, commands, strict=True))]  # fmt: skip


def read_as(uid: int, path: Path) -> str:
    """What a process of `uid` gets opening `path` on the node (cat's error, or `read`)."""
    done = subprocess.run(["/bin/cat", str(path)], capture_output=True, text=True, user=uid,
                          group=uid, extra_groups=[], check=False)  # fmt: skip
    return "read" if done.returncode == 0 else done.stderr.strip().rsplit(": ", 1)[-1]


def test_another_tenants_job_cannot_ssh_in_nor_read_the_keys(node: ContainerRuntime) -> None:  # noqa: F811
    if shutil.which("dropbear", path="/usr/sbin:/usr/bin") is None:
        pytest.skip("needs dropbear (make system)")
    server, client = ssh_job(node, "tenant-a", UID_A, ["sleep 60", "ssh worker-0 id -u"], 1)
    node.start(server)
    wait_running(node, server.key)
    node.start(client)
    done = wait_exited(node, client.key, 30)
    assert done.reason == TaskReason.COMPLETED, done.message
    assert node.read_log(client.key).decode().split() == [str(UID_A)]
    target = f"{server.peers[0].address}"
    (hostile,) = ssh_job(node, "tenant-b", UID_B, [
        f"ssh -o BatchMode=yes -o ConnectTimeout=3 -o StrictHostKeyChecking=no -p {SSH_PORT} "
        f"{target} true; echo exit=$?"], 5)  # fmt: skip
    node.start(hostile)
    refused = wait_exited(node, hostile.key, 30)
    log = node.read_log(hostile.key).decode()
    assert "exit=255" in log and "timed out" in log, (refused, log)
    keys = node.task_dir(server.key).path / "gpuyard" / "ssh"
    assert os.stat(keys).st_mode & 0o777 == 0o700 and os.stat(keys).st_uid == UID_A
    for name in ("id_ed25519", "sshd_host_key", "authorized_keys"):
        assert os.stat(keys / name).st_mode & 0o777 == 0o600
        assert read_as(UID_B, keys / name) == "Permission denied"
