"""`NodeAgent`: one node's side of the engine — its inventory, and its tasks' lives.

A plain class: the local engine holds one in-process; a distributed engine runs one per node.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from gpuyard.engine.nodeimages import node_image_op
from gpuyard.model import GpuDevice, Node
from gpuyard.runtime.executor import ContainerRuntime
from gpuyard.runtime.gpustats import NvmlSampler
from gpuyard.runtime.nodereadings import NodeReader, NodeReadings
from gpuyard.runtime.streams import NodeStreams, streams_for
from gpuyard.runtime.types import TaskLaunch, TaskStatus

GpuHealth = Callable[[tuple[GpuDevice, ...]], tuple[GpuDevice, ...]]


class NodeAgent:
    """`health` (e.g. `runtime.gpuhealth.NvmlHealth().check`) marks the GPUs that NVML reports
    broken in each inventory, so the scheduler leaves them out. `readings` are the node's own
    NVML samples (only where it has real GPUs) and its tasks' cgroups."""

    def __init__(
        self, node: Node, runtime: ContainerRuntime, health: GpuHealth | None = None
    ) -> None:
        self._node = node
        self._runtime = runtime
        self._health = health
        sampler = NvmlSampler() if any(not g.fake for g in node.gpus) else None
        self._reader = NodeReader(runtime.keys, sampler)

    @property
    def name(self) -> str:
        return self._node.name

    @property
    def runtime_name(self) -> str:
        return self._runtime.name

    def inventory(self) -> Node:
        if self._health is None or not self._node.gpus:
            return self._node
        return replace(self._node, gpus=self._health(self._node.gpus))

    def claim_addresses(self, keys: list[str]) -> dict[str, str]:
        return self._runtime.claim_addresses(keys)

    def set_cluster(self, members: list[tuple[str, str]]) -> None:
        """Every node's (task subnet, address): routes to the others' task subnets."""
        self._runtime.set_cluster(members)

    def start(self, launch: TaskLaunch) -> str | None:
        return self._runtime.start(launch)

    def status(self, key: str) -> TaskStatus:
        return self._runtime.status(key)

    def stop(self, key: str, grace_s: float) -> None:
        self._runtime.stop(key, grace_s)

    def read_log(self, key: str, offset: int, limit: int) -> bytes:
        return self._runtime.read_log(key, offset, limit)

    def tail_log(self, key: str, lines: int) -> str:
        return self._runtime.tail_log(key, lines)

    def log_dropped(self, key: str) -> int:
        return self._runtime.log_dropped(key)

    def log_size(self, key: str) -> int:
        return self._runtime.log_size(key)

    def release(self, key: str) -> None:
        self._runtime.remove(key)

    def readings(self) -> NodeReadings:
        """This node's GPUs (its NVML) and its tasks' CPU and memory (their cgroups), now."""
        return self._reader.read()

    def image_op(self, op: str, *args: Any) -> Any:
        """An operation on this node's image store (`nodeimages.node_image_op`)."""
        return node_image_op(self._runtime, op, *args)

    def keys(self) -> list[str]:
        return self._runtime.keys()

    def streams(self) -> NodeStreams:
        """Exec sessions and port connections into this node's tasks (`runtime/streams.py`)."""
        return streams_for(self._runtime.tasks_dir)

    def watch(self, on_change: Callable[[], None]) -> None:
        self._runtime.watch(on_change)

    def close(self) -> None:
        self._reader.close()
        self._runtime.close()
