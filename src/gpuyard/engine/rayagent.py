"""`AgentActor`: the node agent of one Ray node, run there as a detached, named Ray actor.

It holds the same `NodeAgent` and `ContainerRuntime` as the local engine, so tasks run the same
way (a supervisor per task, real crun containers) and outlive the actor: an actor that is
restarted on its node, or a control plane that reconnects, finds them again in the node's
storage root (`<root>/<node name>`; `root` is `$GPUYARD_NODE_ROOT` on the node if set, else
the one the control plane passes).

Ray runs `AgentActor` through `ray.remote(AgentActor)` in `engine/ray.py`; nothing here
depends on being an actor except `node_id`.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import ray

from gpuyard.engine.agent import NodeAgent
from gpuyard.model import Node
from gpuyard.runtime.executor import ContainerRuntime
from gpuyard.runtime.gpuhealth import NvmlHealth
from gpuyard.runtime.gpus import detect_gpus
from gpuyard.runtime.nodereadings import NodeReadings
from gpuyard.runtime.tasknet import NetConfig
from gpuyard.runtime.types import TaskLaunch, TaskStatus

NODE_ROOT_ENV = "GPUYARD_NODE_ROOT"


def node_root(default_root: str, node_name: str) -> Path:
    """Where a node keeps its tasks: `$GPUYARD_NODE_ROOT/<name>`, else `<default>/<name>`."""
    return Path(os.environ.get(NODE_ROOT_ENV) or default_root) / node_name


class AgentActor:
    """One node's `NodeAgent`. `node` has the CPU, memory, address and task subnet (a slice of
    the cluster's task network `task_network`) the engine gave it; its GPUs are found here: the
    declared `fake_gpus`, else NVML's."""

    def __init__(
        self,
        node: Node,
        fake_gpus: str | None,
        default_root: str,
        oci_runtime: str | None,
        task_network: str | None = None,
    ) -> None:
        gpus = detect_gpus(fake_gpus, node.name)
        network = NetConfig.of(node.task_subnet, task_network)
        root = node_root(default_root, node.name)
        runtime = ContainerRuntime(root, oci_runtime, network=network)
        health = NvmlHealth().check if any(not g.fake for g in gpus) else None
        node = replace(node, gpus=gpus, task_subnet=network.subnet)
        self._agent = NodeAgent(node, runtime, health)

    def node_id(self) -> str:
        """The Ray node this actor lives on (a restarted node has a new one)."""
        return ray.get_runtime_context().get_node_id()

    def inventory(self) -> Node:
        """The node with its GPUs' current health (NVML is asked at most every few seconds)."""
        return self._agent.inventory()

    def runtime_name(self) -> str:
        return self._agent.runtime_name

    def claim_addresses(self, keys: list[str]) -> dict[str, str]:
        return self._agent.claim_addresses(keys)

    def set_cluster(self, members: list[tuple[str, str]]) -> None:
        self._agent.set_cluster(members)

    def start(self, launch: TaskLaunch) -> str | None:
        return self._agent.start(launch)

    def image_op(self, op: str, *args: Any) -> Any:
        """An operation on this node's image store (`engine/nodeimages.py`)."""
        return self._agent.image_op(op, *args)

    def status(self, key: str) -> TaskStatus:
        return self._agent.status(key)

    def statuses(self) -> dict[str, TaskStatus]:
        """Every task this node still holds (ended ones until they are released)."""
        keys = self._agent.keys()
        return {key: self._agent.status(key) for key in keys}

    def stop(self, key: str, grace_s: float) -> None:
        self._agent.stop(key, grace_s)

    def read_log(self, key: str, offset: int, limit: int) -> bytes:
        return self._agent.read_log(key, offset, limit)

    def tail_log(self, key: str, lines: int) -> str:
        return self._agent.tail_log(key, lines)

    def log_dropped(self, key: str) -> int:
        return self._agent.log_dropped(key)

    def log_size(self, key: str) -> int:
        return self._agent.log_size(key)

    def release(self, key: str) -> None:
        self._agent.release(key)

    def readings(self) -> NodeReadings:
        """This node's GPUs from its own NVML and its tasks' cgroups (engine/nodemetrics.py)."""
        return self._agent.readings()
