"""A real 3-node Ray cluster on this machine, for the tests under tests/ray.

The nodes bind to 127.0.0.2-4 (with 127.0.0.1 Ray rewrites the address and the driver hangs),
each with a small object store and 2 fake GPUs declared as the resource
`gpuyard_fake_gpus_A100-80GB`, and a name label (`RayCluster.node_args`: a subclass gives its
nodes other GPUs or another environment). Each node keeps its tasks under
`<data dir>/nodes/<node name>`.

`RayCluster.lose(name)` is a machine that dies: the node's raylet and every Ray worker process
under it (its agent actor) are SIGKILLed, then the node's task containers and supervisors, which
Ray does not own and which would die with a real machine.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

from ray.cluster_utils import Cluster

from gpuyard.runtime.ociruntime import OciRuntime
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
        self.cluster = Cluster(
            initialize_head=True,
            head_node_args={**self.node_args(name, ip), "include_dashboard": False},
        )
        self.nodes = {name: self.cluster.head_node}
        for name, ip in workers:
            self.nodes[name] = self.cluster.add_node(**self.node_args(name, ip))

    def node_args(self, name: str, ip: str) -> dict:
        """`ray start`'s arguments for node `name` (a subclass gives its nodes other GPUs)."""
        return {**NODE_ARGS, "node_ip_address": ip, "labels": {"gpuyard.io/node-name": name}}

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
