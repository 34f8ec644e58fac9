"""Nodes as last reported by the engine, so listings survive restarts and show lost nodes."""

from __future__ import annotations

import json
from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from gpuyard.model import Clock, GpuDevice, Node
from gpuyard.store.tables import NodeRow


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
                s.add(row)

    def list(self) -> list[Node]:
        with self._sessions() as s:
            return [_node(r) for r in s.scalars(select(NodeRow).order_by(NodeRow.name))]


def _gpu_doc(g: GpuDevice) -> dict[str, object]:
    return {
        "index": g.index,
        "uuid": g.uuid,
        "type": g.type,
        "memory_mb": g.memory_mb,
        "fake": g.fake,
        "healthy": g.healthy,
        "minor": g.minor,
    }


def _node(r: NodeRow) -> Node:
    gpus = tuple(GpuDevice(**d) for d in json.loads(r.gpus))
    return Node(r.name, r.cpu_milli, r.memory_mb, gpus, schedulable=r.schedulable)
