"""A fake cluster for controller tests: nodes declared in memory, tasks that end when told.

It implements the real `Engine` interface, so the real controller, store and scheduler run
unchanged around it (injected through the constructor, no monkeypatching).
"""

from __future__ import annotations

from gpuyard.engine import NodeUnavailable
from gpuyard.model import Node
from gpuyard.runtime.nodereadings import NodeReadings
from gpuyard.runtime.types import TaskExit, TaskLaunch, TaskPhase, TaskStatus


class FakeEngine:
    name = "fake"

    def __init__(self, *nodes: Node, now: float = 0.0) -> None:
        self._nodes = {n.name: n for n in nodes}
        self.launched: dict[str, TaskLaunch] = {}
        self.status_of: dict[str, TaskStatus] = {}
        self.stopped: dict[str, float] = {}
        self.released: list[str] = []
        self.node_of: dict[str, str] = {}
        self.addresses: dict[str, str] = {}  # task key → its address (claim_addresses)
        self.logs: dict[str, bytes] = {}  # canned task logs, by task key
        self.dropped: dict[str, int] = {}  # bytes each canned log dropped (its cap)
        self.start_error: Exception | None = None  # raised by every start() while set
        self.readings_of: dict[str, NodeReadings] = {}  # what each node reads of itself
        self.silent: set[str] = set()  # nodes whose agent gives no readings (timed out)
        self.readings_waits: list[float] = []  # the timeout of each readings() call
        self.now = now

    # -- test controls --
    def run(self, key: str) -> None:
        self.status_of[key] = TaskStatus(key, TaskPhase.RUNNING, started_at=self.now)

    def exit(self, key: str, code: int, reason: str) -> None:
        started = self.status_of[key].started_at or self.now
        self.status_of[key] = TaskStatus(
            key, TaskPhase.EXITED, started, TaskExit(code, reason, self.now, "")
        )

    def lose_node(self, name: str) -> None:
        """The node and every trace of its tasks disappear."""
        del self._nodes[name]
        for key in [k for k, n in self.node_of.items() if n == name]:
            self.status_of.pop(key, None)

    def keys_on(self, job_id: str) -> list[str]:
        return sorted(k for k, launch in self.launched.items() if launch.job_id == job_id)

    # -- Engine --
    def nodes(self) -> list[Node]:
        return list(self._nodes.values())

    def claim_addresses(self, node: str, keys: list[str]) -> dict[str, str]:
        """Each task at an address of its own, as a real node gives (10.<200 + node>.x.y)."""
        if node not in self._nodes:
            raise NodeUnavailable(node)
        base = 200 + sorted(self._nodes).index(node)
        for key in keys:
            n = len(self.addresses)
            self.addresses.setdefault(key, f"10.{base}.{n // 250}.{n % 250 + 2}")
        return {key: self.addresses[key] for key in keys}

    def start(self, node: str, launch: TaskLaunch) -> None:
        if node not in self._nodes:
            raise NodeUnavailable(node)
        if self.start_error is not None:
            raise self.start_error
        self.launched[launch.key] = launch
        self.node_of[launch.key] = node
        self.status_of[launch.key] = TaskStatus(launch.key, TaskPhase.STARTING)

    def status(self, node: str, key: str) -> TaskStatus:
        return self.status_of.get(key, TaskStatus(key, TaskPhase.UNKNOWN))

    def stop(self, node: str, key: str, grace_s: float) -> None:
        self.stopped[key] = grace_s

    def read_log(self, node: str, key: str, offset: int, limit: int) -> bytes:
        self._reachable(node)
        return self.logs.get(key, b"")[offset : offset + limit]

    def log_dropped(self, node: str, key: str) -> int:
        self._reachable(node)
        return self.dropped.get(key, 0)

    def log_size(self, node: str, key: str) -> int:
        self._reachable(node)
        return len(self.logs.get(key, b""))

    def tail_log(self, node: str, key: str, lines: int) -> str:
        self._reachable(node)
        text = self.logs.get(key, b"").decode(errors="replace")
        return "".join(text.splitlines(keepends=True)[-lines:]) if lines else ""

    def _reachable(self, node: str) -> None:
        if node not in self._nodes:
            raise NodeUnavailable(node)

    def release(self, node: str, key: str) -> None:
        self.released.append(key)

    def held_tasks(self, node: str) -> list[str]:
        self._reachable(node)
        return sorted(k for k, n in self.node_of.items()
                      if n == node and k in self.status_of and k not in self.released)  # fmt: skip

    def readings(self, timeout_s: float) -> dict[str, NodeReadings | None]:
        self.readings_waits.append(timeout_s)
        return {
            n: None if n in self.silent else self.readings_of.get(n, NodeReadings())
            for n in self._nodes
        }

    def watch(self, on_change) -> None:
        self.on_change = on_change

    def close(self) -> None:
        return None
