"""Exec and port streams on a Ray node: a `StreamsActor` per node beside its agent.

The streams of `runtime/streams.py` are served on their node by an actor of their own
(`streams-<node>`, pinned to the node, no CPU), not by the node's agent: a stream's `read`
waits up to a second for output, and sessions held open would otherwise take the agent's
threads from its starts and status polls. The actor is made on a node's first exec or port
connection, belongs to the control plane that made it (not detached: it goes with the control
plane, and its sessions with it), and finds the node's tasks where the agent keeps them
(`rayagent.node_root`). Ray restarts it on its node if its process dies (the book keeps an
actor until its node restarts, so without that the node would take no exec again): the
sessions it held end, and a call meanwhile is `AgentUnreachable`, try again. `RayNodeStreams`
is the control plane's side: the same calls as `NodeStreams`, each a call of the actor; the
actor's own errors (`ExecError`, `StreamGone`) come back as themselves.
"""

from __future__ import annotations

import threading
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from gpuyard.engine.base import AgentUnreachable
from gpuyard.engine.rayagent import node_root
from gpuyard.runtime.streams import Frame, NodeStreams

STREAMS_CONCURRENCY = 64  # > MAX_STREAMS: a read held per stream leaves room for writes
OPEN_TIMEOUT_S = 30.0  # the actor may have to start first
CALL_TIMEOUT_S = 10.0


class StreamsActor:
    """The node's `NodeStreams`, served to the control plane."""

    def __init__(self, node_name: str, default_root: str) -> None:
        self._streams = NodeStreams(node_root(default_root, node_name) / "tasks")

    def open_exec(self, key: str, args: list[str], tty: bool, rows: int, cols: int) -> str:
        return self._streams.open_exec(key, args, tty, rows, cols)

    def open_port(self, key: str, port: int) -> str:
        return self._streams.open_port(key, port)

    def read(self, sid: str, wait_s: float) -> list[Frame]:
        return self._streams.read(sid, wait_s)

    def write(self, sid: str, data: bytes) -> None:
        self._streams.write(sid, data)

    def close_input(self, sid: str) -> None:
        self._streams.close_input(sid)

    def resize(self, sid: str, rows: int, cols: int) -> None:
        self._streams.resize(sid, rows, cols)

    def close(self, sid: str) -> None:
        self._streams.close(sid)


class RayNodeStreams:
    """One node's streams, through its `StreamsActor`."""

    def __init__(self, node: str, actor: Any) -> None:
        self._node = node
        self._actor = actor

    def _call(self, method: str, *args: Any, timeout: float = CALL_TIMEOUT_S) -> Any:
        try:
            return ray.get(getattr(self._actor, method).remote(*args), timeout=timeout)
        except (RayActorError, GetTimeoutError) as e:
            raise AgentUnreachable(f"node {self._node} did not answer ({e}); try again") from e
        except RayTaskError as e:
            if isinstance(e.cause, Exception):
                raise e.cause from None
            raise

    def open_exec(self, key: str, args: list[str], tty: bool, rows: int, cols: int) -> str:
        return self._call("open_exec", key, args, tty, rows, cols, timeout=OPEN_TIMEOUT_S)

    def open_port(self, key: str, port: int) -> str:
        return self._call("open_port", key, port, timeout=OPEN_TIMEOUT_S)

    def read(self, sid: str, wait_s: float) -> list[Frame]:
        return self._call("read", sid, wait_s, timeout=CALL_TIMEOUT_S + wait_s)

    def write(self, sid: str, data: bytes) -> None:
        self._call("write", sid, data, timeout=CALL_TIMEOUT_S + 30.0)

    def close_input(self, sid: str) -> None:
        self._call("close_input", sid)

    def resize(self, sid: str, rows: int, cols: int) -> None:
        self._call("resize", sid, rows, cols)

    def close(self, sid: str) -> None:
        self._call("close", sid)


class RayStreamsBook:
    """The streams actor of each node, made on first use (again after the node restarted)."""

    def __init__(self, namespace: str, default_root: str) -> None:
        self._namespace = namespace
        self._root = default_root
        self._lock = threading.Lock()
        self._actors: dict[str, tuple[str, Any]] = {}  # node → (its Ray node id, actor)

    def of(self, node: str, node_id: str) -> RayNodeStreams:
        with self._lock:
            known = self._actors.get(node)
            if known is None or known[0] != node_id:
                known = self._actors[node] = (node_id, self._make(node, node_id))
        return RayNodeStreams(node, known[1])

    def _make(self, node: str, node_id: str) -> Any:
        options = {
            "name": f"streams-{node}-{node_id[:12]}",
            "namespace": self._namespace,
            "get_if_exists": True,
            "num_cpus": 0,
            "max_concurrency": STREAMS_CONCURRENCY,
            "max_restarts": -1,  # a dead process (OOM, a crash) is replaced, its sessions lost
            "scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=False),
        }
        return ray.remote(StreamsActor).options(**options).remote(node, self._root)
