"""Ray acceptance fixtures: a real 3-node Ray cluster on this machine and the real server on it.

The nodes bind to 127.0.0.2-4 (with 127.0.0.1 Ray rewrites the address and the driver hangs),
each with a small object store and 2 fake GPUs declared as the resource
`gpuyard_fake_gpus_A100-80GB`, and a name label. The server runs `gpuyard up --engine
ray://<head>`; each node keeps its tasks under `<data dir>/nodes/<node name>`.

`RayCluster.lose(name)` is a machine that dies: the node's raylet and every Ray worker process
under it (its agent actor) are SIGKILLed, then the node's task containers and supervisors, which
Ray does not own and which would die with a real machine.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ray.cluster_utils import Cluster

from e2e.conftest import Server
from gpuyard.runtime.ociruntime import OciRuntime
from gpuyard.runtime.rootfs import HOST_PATHS_ENV
from gpuyard.runtime.taskdir import TaskDir, read_json
from tasknetworks import nodes_under, random_subnets, remove_node_network

os.environ["RAY_USAGE_STATS_ENABLED"] = "0"

NODES = {"ray-a": "127.0.0.2", "ray-b": "127.0.0.3", "ray-c": "127.0.0.4"}  # ray-a: the head
FAKE_GPUS_PER_NODE = 2
NODE_ARGS = {
    "num_cpus": 2,
    "memory": 4 << 30,
    "object_store_memory": 80 << 20,
    "resources": {"gpuyard_fake_gpus_A100-80GB": FAKE_GPUS_PER_NODE},
}


class RayCluster:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        # the nodes' task subnets (a /24 each) outlive a test: the module's, not a test's
        self.task_network = random_subnets()[1]
        (name, ip), *workers = NODES.items()
        head = {**NODE_ARGS, "node_ip_address": ip, "labels": {"gpuyard.io/node-name": name}}
        self.cluster = Cluster(
            initialize_head=True,
            head_node_args={**head, "include_dashboard": False},
        )
        self.nodes = {name: self.cluster.head_node}
        for name, ip in workers:
            self.nodes[name] = self.cluster.add_node(
                **NODE_ARGS, node_ip_address=ip, labels={"gpuyard.io/node-name": name}
            )

    @property
    def engine(self) -> str:
        return f"ray://{self.cluster.address}"

    def node_root(self, name: str) -> Path:
        return self.data_dir / "nodes" / name

    def lose(self, name: str) -> None:
        """The node `name` (not the head) dies with everything that ran on it."""
        node = self.nodes.pop(name)
        raylet = node.all_processes["raylet"][0].process.pid
        workers = descendants(raylet)
        self.cluster.remove_node(node, allow_graceful=False)
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        kill_tasks(self.node_root(name))

    def shutdown(self) -> None:
        for name in NODES:
            kill_tasks(self.node_root(name))
        self.cluster.shutdown()
        for tag in nodes_under(self.data_dir):  # agents die without closing their nodes
            remove_node_network(tag)


def descendants(pid: int) -> list[int]:
    """The processes under `pid` (from /proc's parent links), deepest last."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_tasks(root: Path) -> None:
    """SIGKILL the supervisors of the tasks under a node root and force-delete their containers."""
    tasks = root / "tasks"
    if not tasks.is_dir():
        return
    for path in tasks.iterdir():
        td = TaskDir(path)
        sup = td.supervisor()
        if sup is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(sup[0], signal.SIGKILL)
        spec = read_json(td.task)
        if isinstance(spec, dict):
            rt = OciRuntime.from_json(spec["runtime"])
            subprocess.run(
                rt.command("delete", "--force", path.name), capture_output=True, check=False
            )


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    """One cluster for the module (starting one takes 15-35 s here); a test that loses a node
    comes last."""
    began = time.monotonic()
    # the training job runs this venv's python, whose interpreter lives outside the host's
    # system dirs (pyenv, under /root): each node shows it to tasks read-only, as a node's
    # admin would; its nodes take the setting when they start, no other test sees it
    with pytest.MonkeyPatch.context() as env:
        env.setenv(HOST_PATHS_ENV, sys.base_prefix)
        cluster = RayCluster(tmp_path_factory.mktemp("ray") / "data")
    print(f"3-node Ray cluster up in {time.monotonic() - began:.1f}s")
    yield cluster
    cluster.shutdown()


@pytest.fixture
def ray_server(ray_cluster: RayCluster, tmp_path: Path) -> Iterator[Server]:
    """The server on the cluster, on the module's data dir (its storage root: the dir above)."""
    log = tmp_path / "server.log"
    srv = Server(ray_cluster.data_dir, log, "--engine", ray_cluster.engine,
                 "--task-network", ray_cluster.task_network)
    try:
        srv.start()
        # the job runs this venv's python, under /root: tasks run as root (few capabilities)
        # and may read this checkout (the venv and the training script) as their dataDir
        roots = [str(ray_cluster.data_dir.parent), str(Path(__file__).resolve().parents[2])]
        settings = {"allowRoot": True, "storageRoots": roots}
        r = srv.http.patch("/api/v1/tenants/default", json=settings)
        assert r.status_code == 200, r.text
        yield srv
    finally:
        srv.stop()
