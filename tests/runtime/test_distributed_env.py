"""A job's task: its rank, world, master and peers in its env; its hosts files in its config."""

from __future__ import annotations

from pathlib import Path

from gpuyard.model import TaskReason
from gpuyard.runtime.env import HOSTS_FILE, build_env, distributed_env
from gpuyard.runtime.executor import ContainerRuntime
from gpuyard.runtime.oci import build_config, write_hosts_files
from gpuyard.runtime.rootfs import Rootfs
from gpuyard.runtime.types import TaskLaunch, TaskPeer

from .helpers import MakeLaunch, run_task

PEERS = (
    TaskPeer("ps", 0, "n1", "10.0.0.1", (("master", (20000,)), ("http", (20001, 20002)))),
    TaskPeer("worker", 0, "n1", "10.0.0.1"),
    TaskPeer("worker", 1, "n2", "10.0.0.2", (("grpc", (20000,)),)),
)


def launch(role: str, index: int, **fields: object) -> TaskLaunch:
    values: dict[str, object] = {
        "key": f"j-1-{role}-{index}", "job_id": "j", "job_name": "demo", "role": role,
        "index": index, "attempt": 1, "command": "true", "cpu": 1, "memory_mb": 256,
        "peers": PEERS,
    }
    values.update(fields)
    return TaskLaunch(**values)  # type: ignore[arg-type]


def test_each_task_gets_its_rank_and_the_masters_address() -> None:
    table = [  # role, index → RANK, LOCAL_RANK, LOCAL_WORLD_SIZE, own address
        ("ps", 0, "0", "0", "2", "10.0.0.1"),
        ("worker", 0, "1", "1", "2", "10.0.0.1"),
        ("worker", 1, "2", "0", "1", "10.0.0.2"),
    ]
    for role, index, rank, local_rank, local_world, ip in table:
        env = distributed_env(launch(role, index))
        assert env["RANK"] == rank and env["LOCAL_RANK"] == local_rank
        assert env["LOCAL_WORLD_SIZE"] == local_world
        assert env["WORLD_SIZE"] == "3"
        assert env["MASTER_ADDR"] == "10.0.0.1" and env["MASTER_PORT"] == "20000"
        assert env["PAI_CURRENT_CONTAINER_IP"] == ip
        assert env["PAI_HOST_IP_worker_1"] == "10.0.0.2"
        assert env["PAI_PORT_LIST_ps_0_http"] == "20001,20002"
        assert env["PAI_PORT_LIST_worker_1_grpc"] == "20000"


def test_the_user_cannot_override_the_distributed_variables() -> None:
    user = (("RANK", "7"), ("MASTER_ADDR", "evil"), ("OTHER", "x"))
    env = dict(e.split("=", 1) for e in build_env(launch("worker", 1, env=user)))
    assert env["RANK"] == "2" and env["MASTER_ADDR"] == "10.0.0.1" and env["OTHER"] == "x"


def test_a_launch_without_peers_has_no_distributed_variables() -> None:
    assert distributed_env(launch("worker", 0, peers=())) == {}


def test_hosts_files_are_written_and_mounted(tmp_path: Path) -> None:
    task = launch("worker", 0)
    write_hosts_files(tmp_path, task)
    lines = (tmp_path / "gpuyard" / "hosts").read_text().splitlines()
    assert lines == ["10.0.0.1 ps-0", "10.0.0.1 worker-0", "10.0.0.2 worker-1"]
    etc = (tmp_path / "etc-hosts").read_text().splitlines()
    assert etc[0].startswith("127.0.0.1 localhost") and etc[-3:] == lines
    rootfs = Rootfs(tmp_path / "root", readonly=False)
    config = build_config(task, rootfs, tmp_path / "work", tmp_path)
    binds = {m["destination"]: m for m in config["mounts"] if m["type"] == "bind"}
    assert binds["/run/gpuyard"]["source"] == str(tmp_path / "gpuyard")
    assert binds["/etc/hosts"]["source"] == str(tmp_path / "etc-hosts")
    assert "ro" in binds["/etc/hosts"]["options"]
    without = build_config(task, rootfs, tmp_path / "work")
    assert "/run/gpuyard" not in {m["destination"] for m in without["mounts"]}


def test_a_container_sees_its_rank_and_resolves_its_peers(
    runtime: ContainerRuntime, make_launch: MakeLaunch, tmp_path: Path
) -> None:
    command = (
        "env > /output/env; cat /run/gpuyard/hosts > /output/hosts; "
        "getent hosts worker-1 > /output/resolved || grep worker-1 /etc/hosts > /output/resolved"
    )
    # the node's network: these peers' addresses are made up (tests/security/test_network.py
    # runs a job's tasks in namespaces of their own, at the addresses their node gave them)
    task = make_launch(command, role="worker", index=1, peers=PEERS, network="host")
    exit_ = run_task(runtime, task)
    assert exit_.reason == TaskReason.COMPLETED, exit_.message
    out = tmp_path / "output"
    env = dict(line.split("=", 1) for line in (out / "env").read_text().splitlines() if "=" in line)
    assert (env["RANK"], env["WORLD_SIZE"], env["MASTER_ADDR"]) == ("2", "3", "10.0.0.1")
    assert env["MASTER_PORT"] == "20000" and env["GPUYARD_HOSTS_FILE"] == HOSTS_FILE
    assert (out / "hosts").read_text().splitlines()[-1] == "10.0.0.2 worker-1"
    assert (out / "resolved").read_text().split()[:2] == ["10.0.0.2", "worker-1"]
