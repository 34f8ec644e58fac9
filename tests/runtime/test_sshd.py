"""sshd in tasks (the ssh plugin): the pieces (keys, accounts, client config) and two real
containers of one job, the first reaching the second by its host name with the job's key."""

from __future__ import annotations

import base64
import os
import shutil
from pathlib import Path

import pytest

from gpuyard.model import TaskReason
from gpuyard.runtime.executor import ContainerRuntime
from gpuyard.runtime.sshd import (
    accounts,
    client_config,
    dropbear_private,
    known_hosts,
    listen_addresses,
)
from gpuyard.runtime.types import SshLaunch, TaskPeer

from .helpers import MakeLaunch, run_task, wait_running

HOST_SEED = base64.b64encode(bytes(range(32))).decode()
JOB_SEED = base64.b64encode(bytes(range(1, 33))).decode()
OTHER_SEED = base64.b64encode(bytes(range(2, 34))).decode()
UID = 1 << 30


def test_the_task_user_is_added_to_the_accounts_with_the_workspace_as_home() -> None:
    passwd = "root:x:0:0:root:/root:/bin/bash\ntask:x:5:5::/home/task:/bin/sh\n"
    text, group, name = accounts(passwd, "root:x:0:\n", UID, UID)
    assert name == f"task{UID}"
    assert text.splitlines()[-1] == f"task{UID}:x:{UID}:{UID}:gpuyard task:/workspace:/bin/sh"
    assert group.splitlines() == ["root:x:0:", f"task{UID}:x:{UID}:"]
    root_text, _, root = accounts(passwd, "root:x:0:\n", 0, 0)
    assert root == "root" and "root:x:0:0:gpuyard task:/workspace:/bin/sh" in root_text
    assert root_text.count("root:") == 1


def test_the_client_knows_each_task_by_name_and_address_with_the_jobs_host_key() -> None:
    servers = [(TaskPeer("worker", 0, "n", "10.1.0.2"), 20001),
               (TaskPeer("worker", 1, "n", "10.1.0.3"), 20002)]  # fmt: skip
    config = client_config(servers, "task", job_keys=True)
    assert "Host worker-1 10.1.0.3\n  HostName 10.1.0.3\n  Port 20002\n" in config
    assert config.count("StrictHostKeyChecking yes") == 2
    shared = [(TaskPeer("w", 0, "n", "10.0.0.1"), 1), (TaskPeer("w", 1, "n", "10.0.0.1"), 2)]
    assert "Host w-1\n" in client_config(shared, "task", job_keys=False)
    lines = known_hosts(servers, "ssh-ed25519 KEY").splitlines()
    assert lines[1] == "[worker-1]:20002,[10.1.0.3]:20002 ssh-ed25519 KEY"


def test_sshd_listens_on_the_tasks_loopback_too_where_gpuyard_ssh_reaches_it() -> None:
    assert listen_addresses("isolated", "10.1.0.2", 20001) == "10.1.0.2:20001,127.0.0.1:20001"
    assert listen_addresses("host", "192.168.1.5", 20001) == "192.168.1.5:20001"  # the node's
    assert listen_addresses("isolated", "127.0.0.1", 20001) == "127.0.0.1:20001"


def test_the_host_key_is_in_dropbears_format() -> None:
    key = dropbear_private(HOST_SEED)
    assert key[:15] == b"\x00\x00\x00\x0bssh-ed25519" and len(key) == 15 + 4 + 64


def _pair(make_launch: MakeLaunch, root: Path, seed: str, command: str):  # noqa: ANN202
    peers = (TaskPeer("worker", 0, "local", "127.0.0.1", (("ssh", (28221,)),)),
             TaskPeer("worker", 1, "local", "127.0.0.1", (("ssh", (28222,)),)))  # fmt: skip
    dirs = {"data_dir": None, "output_dir": str(root / "out"), "storage_roots": (str(root),),
            "peers": peers, "network": "host", "run_as": (UID, UID)}  # fmt: skip
    server = make_launch("sleep 60", index=1, ssh=SshLaunch(HOST_SEED, JOB_SEED), **dirs)
    client = make_launch(command, index=0, ssh=SshLaunch(HOST_SEED, seed), **dirs)
    return server, client


@pytest.fixture
def crun(container_host: None, tmp_path: Path):  # noqa: ANN201
    rt = ContainerRuntime(tmp_path / "state", runtime="crun")
    yield rt
    for key in rt.keys():  # noqa: SIM118 - not a dict
        rt.stop(key, 0)
    rt.close()


def test_a_task_reaches_its_sibling_by_name_and_a_foreign_key_is_refused(
    crun: ContainerRuntime, make_launch: MakeLaunch, tmp_path: Path
) -> None:
    if shutil.which("dropbear", path="/usr/sbin:/usr/bin") is None:
        pytest.skip("needs dropbear (make system)")
    root = tmp_path / "root"
    (root / "out").mkdir(parents=True)
    for path in (root, root / "out"):
        os.chown(path, UID, UID)
    command = "ssh worker-1 'echo reached $(hostname) as $(id -u) $PAI_TASK_INDEX' > /output/out"
    server, client = _pair(make_launch, root, JOB_SEED, command)
    crun.start(server)
    wait_running(crun, server.key)
    exit_ = run_task(crun, client)
    assert exit_.reason == TaskReason.COMPLETED, exit_.message
    assert (root / "out" / "out").read_text().split() == [
        "reached",
        "worker-1",
        "as",
        str(UID),
        "1",
    ]
    _, stranger = _pair(make_launch, root, OTHER_SEED, "ssh -o BatchMode=yes worker-1 true")
    refused = run_task(crun, stranger)
    assert refused.exit_code == 255, refused.message
    assert "Permission denied (publickey)" in refused.message
