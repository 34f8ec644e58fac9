"""The local engine: this machine is the only node, its agent runs in the server process."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuyard.engine.agent import NodeAgent
from gpuyard.engine.base import NodeUnavailable
from gpuyard.model import Node
from gpuyard.runtime.nodereadings import NodeReadings
from gpuyard.runtime.streams import NodeStreams
from gpuyard.runtime.types import TaskLaunch, TaskPhase, TaskStatus


class LocalEngine:
    name = "local"

    def __init__(self, agent: NodeAgent) -> None:
        self._agent = agent

    @property
    def runtime_name(self) -> str:
        return self._agent.runtime_name

    def nodes(self) -> list[Node]:
        return [self._agent.inventory()]

    def _on(self, node: str) -> NodeAgent:
        if node != self._agent.name:
            raise NodeUnavailable(f"node {node} is not part of this cluster")
        return self._agent

    def claim_addresses(self, node: str, keys: list[str]) -> dict[str, str]:
        return self._on(node).claim_addresses(keys)

    def start(self, node: str, launch: TaskLaunch) -> str | None:
        return self._on(node).start(launch)

    def status(self, node: str, key: str) -> TaskStatus:
        if node != self._agent.name:
            return TaskStatus(key, TaskPhase.UNKNOWN)
        return self._agent.status(key)

    def stop(self, node: str, key: str, grace_s: float) -> None:
        self._on(node).stop(key, grace_s)

    def read_log(self, node: str, key: str, offset: int, limit: int) -> bytes:
        return self._on(node).read_log(key, offset, limit)

    def tail_log(self, node: str, key: str, lines: int) -> str:
        return self._on(node).tail_log(key, lines)

    def log_dropped(self, node: str, key: str) -> int:
        return self._on(node).log_dropped(key)

    def log_size(self, node: str, key: str) -> int:
        return self._on(node).log_size(key)

    def streams(self, node: str) -> NodeStreams:
        return self._on(node).streams()

    def release(self, node: str, key: str) -> None:
        self._on(node).release(key)

    def held_tasks(self, node: str) -> list[str]:
        return self._on(node).keys()

    def readings(self, timeout_s: float) -> dict[str, NodeReadings | None]:
        """The one node's readings, read in this process (no wait to bound)."""
        return {self._agent.name: self._agent.readings()}

    def node_names(self) -> list[str]:
        return [self._agent.name]

    def image_op(self, node: str, op: str, *args: Any) -> Any:
        """An operation on the node's image store (`engine/nodeimages.py`)."""
        return self._on(node).image_op(op, *args)

    def watch(self, on_change: Callable[[], None]) -> None:
        self._agent.watch(on_change)

    def close(self) -> None:
        self._agent.close()
