"""The engine of a server that may lead (docs/ha.md): `HandoverEngine`.

Until the server is elected, it touches no node: it lists the nodes as the leader last
recorded them in the store (the API's node lists, the portal and /metrics of a follower say
what the leader sees), and anything that would reach a node (a task's status, a start, a
log) is `NodeUnavailable` naming the reason. Building the real engine on a follower would not
be harmless: on the local engine it sweeps the node's task networks and mounts that the
leader uses. Once elected, `become(engine)` hands every call to the real engine, built then
(it adopts the running tasks: the first cycle reconciles, as after a restart).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuyard.engine import Engine, NodeUnavailable
from gpuyard.model import Clock, Node
from gpuyard.store import Store

RECORDED_WITHIN_S = 90.0  # the leader records its nodes every 30 s (loop.py)
FOLLOWING = "this server follows; the leader serves this (gpuyard admin leader says where)"


class HandoverEngine:
    def __init__(self, store: Store, clock: Clock, name: str) -> None:
        self._store, self._clock = store, clock
        self.name = name
        self.real: Engine | None = None
        self._watcher: Callable[[], None] | None = None

    def become(self, engine: Engine) -> None:
        """This server leads: every call goes to `engine` from now on."""
        self.real = engine
        if self._watcher is not None:
            engine.watch(self._watcher)

    @property
    def runtime_name(self) -> str:
        return getattr(self.real, "runtime_name", "oci") if self.real else "(not yet: follower)"

    def nodes(self) -> list[Node]:
        if self.real is not None:
            return self.real.nodes()
        since = self._clock.now() - RECORDED_WITHIN_S
        return [r.node for r in self._store.nodes.records() if r.last_seen >= since]

    def watch(self, on_change: Callable[[], None]) -> None:
        self._watcher = on_change
        if self.real is not None:
            self.real.watch(on_change)

    def readings(self, timeout_s: float) -> dict[str, Any]:
        """Every node's GPU readings: none while following (the leader's engine reads them)."""
        return self.real.readings(timeout_s) if self.real is not None else {}  # type: ignore[attr-defined]

    def close(self) -> None:
        if self.real is not None:
            self.real.close()

    def __getattr__(self, name: str) -> Any:
        """Any other call: the real engine's, or, while following, one that refuses."""
        if name.startswith("__"):
            raise AttributeError(name)
        real = self.__dict__.get("real")
        if real is not None:
            return getattr(real, name)
        return _refuse


def _refuse(*_args: Any, **_kwargs: Any) -> Any:
    raise NodeUnavailable(FOLLOWING)
