"""The `Engine` interface: where nodes come from and how tasks reach them.

The controller talks only to this interface; `local` runs one in-process `NodeAgent` for this
machine, and the Ray engine (`ray.py`) runs one agent per Ray node.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from gpuyard.model import Node
from gpuyard.runtime.nodereadings import NodeReadings
from gpuyard.runtime.types import TaskLaunch, TaskStatus


class TaskStreams(Protocol):
    """A node's exec sessions and port connections into its running tasks, by id
    (`runtime/streams.py` has the frames `read` returns and the errors)."""

    def open_exec(self, key: str, args: list[str], tty: bool, rows: int, cols: int) -> str: ...

    def open_port(self, key: str, port: int) -> str: ...

    def read(self, sid: str, wait_s: float) -> list[tuple[int, bytes]]: ...

    def write(self, sid: str, data: bytes) -> None: ...

    def close_input(self, sid: str) -> None: ...

    def resize(self, sid: str, rows: int, cols: int) -> None: ...

    def close(self, sid: str) -> None: ...


class NodeUnavailable(RuntimeError):
    """The node is gone: its tasks are lost."""


class AgentUnreachable(NodeUnavailable):
    """The node is still there but its agent did not answer in time: no news, ask again."""


class Engine(Protocol):
    name: str

    def nodes(self) -> list[Node]: ...

    def claim_addresses(self, node: str, keys: list[str]) -> dict[str, str]:
        """Have `node` hold a network namespace for each task key (before the tasks start, so
        that each is told its peers' addresses); key → address. Asking again is harmless."""
        ...

    def start(self, node: str, launch: TaskLaunch) -> str | None:
        """Start the task on `node`; what the start found of its image (`image present`,
        `pulling image X`), None when there is nothing to say."""
        ...

    def status(self, node: str, key: str) -> TaskStatus: ...

    def stop(self, node: str, key: str, grace_s: float) -> None: ...

    def read_log(self, node: str, key: str, offset: int, limit: int) -> bytes: ...

    def tail_log(self, node: str, key: str, lines: int) -> str: ...

    def log_dropped(self, node: str, key: str) -> int:
        """How many bytes the log dropped from its middle to stay within its cap (0: whole)."""
        ...

    def log_size(self, node: str, key: str) -> int:
        """The log's length in bytes, so that a follow after a tail starts at its end."""
        ...

    def streams(self, node: str) -> TaskStreams:
        """`node`'s exec and port streams (`gpuyard exec`, `port-forward`, web services)."""
        ...

    def release(self, node: str, key: str) -> None: ...

    def held_tasks(self, node: str) -> list[str]:
        """The task keys `node` still holds: running ones, and ended ones until released."""
        ...

    def readings(self, timeout_s: float) -> dict[str, NodeReadings | None]:
        """Every live node's own readings (its NVML, its tasks' cgroups), asked of all nodes at
        once; None for a node that did not answer within `timeout_s`."""
        ...

    def watch(self, on_change: Callable[[], None]) -> None:
        """Call `on_change` when a task starts or ends, so the controller need not wait to poll."""
        ...

    def close(self) -> None: ...
