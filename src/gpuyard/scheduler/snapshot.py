"""The cluster as the scheduler sees it during one cycle: what is free on each node.

A `ClusterSnapshot` is built from the nodes and the placements that hold resources. The
scheduler charges it as it admits jobs (`assume`), and every charge returns a function that
undoes it, so what-if placements (gang tries, later preemption) cost no copies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from gpuyard.model import JobPlacement, Node, Resources, TaskPlacement

Undo = Callable[[], None]


@dataclass(slots=True)
class NodeFree:
    """The free part of one node. Mutable, but only through `ClusterSnapshot`."""

    node: Node
    cpu_milli: int
    memory_mb: int
    free_gpus: set[int] = field(default_factory=set)

    @property
    def free(self) -> Resources:
        return Resources(self.cpu_milli, self.memory_mb, len(self.free_gpus))


class ClusterSnapshot:
    def __init__(self, nodes: Iterable[Node], held: Iterable[TaskPlacement] = ()) -> None:
        self.nodes: dict[str, NodeFree] = {}
        for n in sorted(nodes, key=lambda n: n.name):
            usable = {g.index for g in n.gpus if g.healthy}
            self.nodes[n.name] = NodeFree(n, n.cpu_milli, n.memory_mb, usable)
        for t in held:
            if t.node in self.nodes:
                self._charge(t)

    def schedulable(self) -> list[NodeFree]:
        return [nf for nf in self.nodes.values() if nf.node.schedulable]

    def assume_task(self, t: TaskPlacement) -> Undo:
        self._charge(t)
        return lambda: self._refund(t)

    def assume(self, placement: JobPlacement) -> Undo:
        undos = [self.assume_task(t) for t in placement.tasks]

        def undo() -> None:
            for u in reversed(undos):
                u()

        return undo

    def _charge(self, t: TaskPlacement) -> None:
        nf = self.nodes[t.node]
        nf.cpu_milli -= t.resources.cpu_milli
        nf.memory_mb -= t.resources.memory_mb
        nf.free_gpus.difference_update(t.gpu_indices)

    def _refund(self, t: TaskPlacement) -> None:
        nf = self.nodes[t.node]
        nf.cpu_milli += t.resources.cpu_milli
        nf.memory_mb += t.resources.memory_mb
        nf.free_gpus.update(t.gpu_indices)
