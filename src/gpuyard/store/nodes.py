"""Nodes as last reported by the engine (so listings survive restarts and show lost nodes),
what admins did to them (cordon, drain), and the ports reserved for tasks on them.

Ports: each task gets its ports from the node's range (`reserve_ports`), never a port that a
task of the same node that has not ended holds; rows of ended tasks are freed on the next
reservation (and with their task). Being rows, reservations survive a controller restart.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from gpuyard.model import Clock, CordonState, GpuDevice, Node, NodeCordon, TaskState
from gpuyard.store.tables import NodeRow, TaskPortRow, TaskRow

FINAL_TASK_STATES = [str(s) for s in TaskState if s.is_final]


class NodeNotFound(LookupError):
    pass


class PortsExhausted(RuntimeError):
    """The node's port range has no room for a task's ports."""


@dataclass(frozen=True, slots=True)
class NodeRecord:
    node: Node
    engine: str
    last_seen: float
    cordon: NodeCordon | None = None


@dataclass(frozen=True, slots=True)
class PortRequest:
    """Ports one task needs on its node: (label, how many) pairs."""

    task_id: int
    node: str
    labels: tuple[tuple[str, int], ...]


TaskPorts = tuple[tuple[str, tuple[int, ...]], ...]  # label → ports, in request order


class NodeRepo:
    def __init__(self, sessions: sessionmaker[Session], clock: Clock) -> None:
        self._sessions = sessions
        self._clock = clock

    def record(self, nodes: Iterable[Node], engine: str) -> None:
        now = self._clock.now()
        with self._sessions.begin() as s:
            for n in nodes:
                row = s.get(NodeRow, n.name) or NodeRow(name=n.name)
                row.cpu_milli, row.memory_mb = n.cpu_milli, n.memory_mb
                row.gpus = json.dumps([_gpu_doc(g) for g in n.gpus])
                row.schedulable, row.engine, row.last_seen = n.schedulable, engine, now
                row.address = n.address
                s.add(row)

    def list(self) -> list[Node]:
        return [r.node for r in self.records()]

    def records(self) -> list[NodeRecord]:
        with self._sessions() as s:
            rows = s.scalars(select(NodeRow).order_by(NodeRow.name))
            return [NodeRecord(_node(r), r.engine, r.last_seen, _cordon(r)) for r in rows]

    def cordons(self) -> dict[str, NodeCordon]:
        """Node name → how it is cordoned, for the nodes that are."""
        with self._sessions() as s:
            rows = s.scalars(select(NodeRow).where(NodeRow.cordon.is_not(None)))
            return {r.name: c for r in rows if (c := _cordon(r)) is not None}

    def cordon(
        self,
        name: str,
        state: CordonState | None,
        by: str | None = None,
        reason: str | None = None,
        deadline: float | None = None,
    ) -> NodeRecord:
        """Cordon, drain (state) or uncordon (None) a node; NodeNotFound for an unknown one."""
        with self._sessions.begin() as s:
            row = s.get(NodeRow, name)
            if row is None:
                raise NodeNotFound(f"no node {name}")
            row.cordon = str(state) if state else None
            row.cordon_at = self._clock.now() if state else None
            row.cordon_by, row.cordon_reason = (by, reason) if state else (None, None)
            row.drain_deadline = deadline if state is CordonState.DRAINING else None
            return NodeRecord(_node(row), row.engine, row.last_seen, _cordon(row))

    # ---- ports -----------------------------------------------------------------------

    def reserve_ports(
        self, requests: Sequence[PortRequest], port_range: tuple[int, int]
    ) -> dict[int, TaskPorts]:
        """Task id → its ports, the lowest free ones of `port_range` (inclusive) on its node,
        all in one transaction; PortsExhausted (nothing reserved) if a node has no room."""
        lo, hi = port_range
        with self._sessions.begin() as s:
            ended = select(TaskRow.id).where(TaskRow.state.in_(FINAL_TASK_STATES))
            s.execute(delete(TaskPortRow).where(TaskPortRow.task_id.in_(ended)))
            nodes = {r.node for r in requests}
            used: dict[str, set[int]] = defaultdict(set)
            for node, port in s.execute(
                select(TaskPortRow.node, TaskPortRow.port).where(TaskPortRow.node.in_(nodes))
            ):
                used[node].add(port)
            out: dict[int, TaskPorts] = {}
            for req in requests:
                taken = used[req.node]
                free = (p for p in range(lo, hi + 1) if p not in taken)
                ports: list[tuple[str, tuple[int, ...]]] = []
                for label, count in req.labels:
                    got = tuple(p for _, p in zip(range(count), free, strict=False))
                    if len(got) < count:
                        raise PortsExhausted(
                            f"node {req.node} has no {count} free port(s) left in {lo}-{hi}"
                        )
                    taken.update(got)
                    ports.append((label, got))
                    s.add_all(
                        TaskPortRow(node=req.node, port=p, task_id=req.task_id, label=label)
                        for p in got
                    )
                out[req.task_id] = tuple(ports)
            return out

    def task_ports(self, task_id: int) -> dict[str, tuple[int, ...]]:
        """Label → the ports reserved for a task (empty once it has ended and they are
        freed)."""
        with self._sessions() as s:
            rows = s.execute(
                select(TaskPortRow.label, TaskPortRow.port)
                .where(TaskPortRow.task_id == task_id)
                .order_by(TaskPortRow.port)
            )
            out: dict[str, tuple[int, ...]] = {}
            for label, port in rows:
                out[label] = (*out.get(label, ()), port)
            return out

    def held_ports(self, node: str) -> dict[int, int]:
        """Port → task id of the ports held on `node` by tasks that have not ended."""
        with self._sessions() as s:
            rows = s.execute(
                select(TaskPortRow.port, TaskPortRow.task_id)
                .join(TaskRow, TaskRow.id == TaskPortRow.task_id)
                .where(TaskPortRow.node == node, TaskRow.state.not_in(FINAL_TASK_STATES))
            )
            return {port: task_id for port, task_id in rows}


def _gpu_doc(g: GpuDevice) -> dict[str, object]:
    return {
        "index": g.index,
        "uuid": g.uuid,
        "type": g.type,
        "memory_mb": g.memory_mb,
        "fake": g.fake,
        "healthy": g.healthy,
        "minor": g.minor,
        "health_cause": g.health_cause,
    }


def _node(r: NodeRow) -> Node:
    gpus = tuple(GpuDevice(**d) for d in json.loads(r.gpus))
    address = r.address or "127.0.0.1"
    return Node(r.name, r.cpu_milli, r.memory_mb, gpus, schedulable=r.schedulable, address=address)


def _cordon(r: NodeRow) -> NodeCordon | None:
    if r.cordon is None:
        return None
    return NodeCordon(
        CordonState(r.cordon), r.cordon_at or 0.0, r.cordon_by, r.cordon_reason, r.drain_deadline
    )
