"""The cluster as the scheduler sees it during one cycle: what is free on each node.

A `ClusterSnapshot` is built from the nodes and the placements that hold resources. The
scheduler charges it as it admits jobs (`assume`) and releases what preemption victims hold
(`release`); every change returns a function that undoes it, so what-if placements (gang
tries, victim removal) cost no copies.

For speed it keeps an index: for each GPU flavor (the GPU type as nodes report it) and for
all GPUs together (`ANY`), the schedulable nodes bucketed by how many such GPUs they have
free. Best-fit is then a walk up the buckets from the size asked, not a scan of every node.
Each bucket is a list of node names kept in name order, and a GPU is free when no charged
whole-GPU task holds it (a count per GPU: two tasks may name one GPU while a preempted job
is still stopping), so the snapshot is a function of what is charged, never of the order of
the changes that led there: an undone what-if (a gang that half fits, a trial preemption
that fails) leaves it exactly as it found it, and a cycle that decides nothing has no side
effect on the next one.

GPU sharing (docs/gpu-sharing.md): a GPU is free, exclusive (held whole by one task) or
shared (holding only shared tasks, with its free memory in `NodeFree.shared`). Opening a
shared GPU takes it out of `free_gpus` (and out of the buckets), so a whole-GPU task never
lands on it; it returns to `free_gpus` when its last shared task leaves. `shared` indexes
the shared GPUs of schedulable nodes, and free GPU memory is kept per flavor (whole free GPUs
count with all their memory).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from gpuyard.model import JobPlacement, Node, Resources, TaskPlacement

Undo = Callable[[], None]
ANY = "*"  # index key: free GPUs of any flavor


@dataclass(slots=True)
class NodeFree:
    """The free part of one node. Mutable, but only through `ClusterSnapshot`."""

    node: Node
    cpu_milli: int
    memory_mb: int
    free_gpus: set[int] = field(default_factory=set)
    flavor_of: dict[int, str] = field(default_factory=dict)  # healthy GPU index → flavor
    group_of: dict[int, int | None] = field(default_factory=dict)  # GPU → topology group
    free_by_flavor: dict[str, int] = field(default_factory=dict)
    memory_of: dict[int, int] = field(default_factory=dict)  # GPU → its memory, MB
    shared: dict[int, int] = field(default_factory=dict)  # shared GPU → its free memory, MB
    shared_tasks: dict[int, int] = field(default_factory=dict)  # shared GPU → tasks on it
    holders: dict[int, int] = field(default_factory=dict)  # GPU → whole-GPU tasks holding it

    @property
    def free(self) -> Resources:
        return Resources(self.cpu_milli, self.memory_mb, len(self.free_gpus))


class ClusterSnapshot:
    def __init__(self, nodes: Iterable[Node], held: Iterable[TaskPlacement] = ()) -> None:
        self.nodes: dict[str, NodeFree] = {}
        self.buckets: dict[str, list[list[str]]] = {}  # key → free count → names, sorted
        self.capacity_by_flavor: dict[str, int] = {}
        self.free_by_flavor: dict[str, int] = {}
        self.gpu_memory_by_flavor: dict[str, int] = {}  # capacity, MB (all healthy GPUs)
        self.free_gpu_memory_by_flavor: dict[str, int] = {}
        self.shared: dict[tuple[str, int], None] = {}  # (node, GPU) in shared mode
        self.capacity = Resources()
        for n in sorted(nodes, key=lambda n: n.name):
            self._add_node(n)
        self.free_cpu_milli = self.capacity.cpu_milli
        self.free_memory_mb = self.capacity.memory_mb
        for t in held:
            if t.node in self.nodes:
                self._charge(t)

    def schedulable(self) -> list[NodeFree]:
        return [nf for nf in self.nodes.values() if nf.node.schedulable]

    @property
    def flavors(self) -> list[str]:
        return sorted(self.capacity_by_flavor)

    def largest_hole(self, flavor: str | None = None) -> int:
        """The most free GPUs of `flavor` (of any, with None) on one schedulable node."""
        buckets = self.buckets.get(flavor or ANY, [])
        return next((n for n in range(len(buckets) - 1, 0, -1) if buckets[n]), 0)

    def assume_task(self, t: TaskPlacement) -> Undo:
        self._charge(t)
        return lambda: self._refund(t)

    def assume(self, placement: JobPlacement) -> Undo:
        return self.assume_tasks(placement.tasks)

    def assume_tasks(self, tasks: Iterable[TaskPlacement]) -> Undo:
        tasks = tuple(tasks)
        for t in tasks:
            self._charge(t)
        return lambda: self._refund_all(tasks)

    def release_tasks(self, tasks: Iterable[TaskPlacement]) -> Undo:
        """Give back what `tasks` hold (a finished job, or a what-if preemption victim)."""
        tasks = tuple(tasks)
        for t in tasks:
            self._refund(t)
        return lambda: self._recharge(tasks)

    def _refund_all(self, tasks: tuple[TaskPlacement, ...]) -> None:
        for t in tasks:
            self._refund(t)

    def _recharge(self, tasks: tuple[TaskPlacement, ...]) -> None:
        for t in tasks:
            self._charge(t)

    def _add_node(self, n: Node) -> None:
        usable = {g.index for g in n.gpus if g.healthy}
        nf = NodeFree(n, n.cpu_milli, n.memory_mb, usable)
        for g in n.gpus:
            if g.healthy:
                nf.flavor_of[g.index] = g.type
                nf.group_of[g.index] = g.topology_group
                nf.memory_of[g.index] = g.memory_mb
                nf.free_by_flavor[g.type] = nf.free_by_flavor.get(g.type, 0) + 1
        self.nodes[n.name] = nf
        if not n.schedulable:
            return
        for i, flavor in nf.flavor_of.items():
            for book in (self.gpu_memory_by_flavor, self.free_gpu_memory_by_flavor):
                book[flavor] = book.get(flavor, 0) + nf.memory_of[i]
        self.capacity = self.capacity + Resources(n.cpu_milli, n.memory_mb, len(usable))
        for flavor, count in nf.free_by_flavor.items():
            self.capacity_by_flavor[flavor] = self.capacity_by_flavor.get(flavor, 0) + count
            self.free_by_flavor[flavor] = self.free_by_flavor.get(flavor, 0) + count
            insort(self._bucket(flavor, count), n.name)
        insort(self._bucket(ANY, len(usable)), n.name)

    def _bucket(self, key: str, count: int) -> list[str]:
        buckets = self.buckets.setdefault(key, [])
        while len(buckets) <= count:
            buckets.append([])
        return buckets[count]

    def _charge(self, t: TaskPlacement) -> None:
        nf = self.nodes[t.node]
        self._account(nf, -t.resources.cpu_milli, -t.resources.memory_mb)
        if t.shared:
            self._charge_shared(nf, t)
            return
        holders, taken = nf.holders, []
        for i in t.gpu_indices:
            if i in nf.flavor_of:
                held = holders[i] = holders.get(i, 0) + 1
                if held == 1 and i in nf.free_gpus:
                    taken.append(i)
        if taken:
            for i in taken:
                self._gpu_memory(nf, i, -nf.memory_of[i])
            self._move(nf, taken, -1)
            nf.free_gpus.difference_update(taken)

    def _refund(self, t: TaskPlacement) -> None:
        nf = self.nodes[t.node]
        self._account(nf, t.resources.cpu_milli, t.resources.memory_mb)
        if t.shared:
            self._refund_shared(nf, t)
            return
        holders, given = nf.holders, []
        for i in t.gpu_indices:
            held = holders.get(i, 0)
            if held > 1:
                holders[i] = held - 1
            elif held == 1:
                del holders[i]
                if i not in nf.free_gpus and i not in nf.shared:
                    given.append(i)
        if given:
            for i in given:
                self._gpu_memory(nf, i, nf.memory_of[i])
            self._move(nf, given, +1)
            nf.free_gpus.update(given)

    def _charge_shared(self, nf: NodeFree, t: TaskPlacement) -> None:
        """Open the task's GPU in shared mode if it is free; then take its memory. A GPU held
        whole (an inconsistent view) or unhealthy is left as it is."""
        if not t.gpu_indices:
            return
        i = t.gpu_indices[0]
        if i in nf.free_gpus:
            self._move(nf, [i], -1)
            nf.free_gpus.discard(i)
            nf.shared[i], nf.shared_tasks[i] = nf.memory_of[i], 0
            if nf.node.schedulable:
                self.shared[nf.node.name, i] = None
        if i not in nf.shared:
            return
        nf.shared[i] -= t.gpu_memory_mb
        nf.shared_tasks[i] += 1
        self._gpu_memory(nf, i, -t.gpu_memory_mb)

    def _refund_shared(self, nf: NodeFree, t: TaskPlacement) -> None:
        i = t.gpu_indices[0] if t.gpu_indices else None
        if i not in nf.shared:
            return
        nf.shared[i] += t.gpu_memory_mb
        nf.shared_tasks[i] -= 1
        self._gpu_memory(nf, i, t.gpu_memory_mb)
        if nf.shared_tasks[i] <= 0:  # the last one left: the GPU is free again
            del nf.shared[i], nf.shared_tasks[i]
            self.shared.pop((nf.node.name, i), None)
            if i not in nf.holders:  # unless a whole-GPU task holds it too
                self._move(nf, [i], +1)
                nf.free_gpus.add(i)

    def _gpu_memory(self, nf: NodeFree, gpu: int, delta_mb: int) -> None:
        if nf.node.schedulable:
            self.free_gpu_memory_by_flavor[nf.flavor_of[gpu]] += delta_mb

    def _account(self, nf: NodeFree, cpu_milli: int, memory_mb: int) -> None:
        nf.cpu_milli += cpu_milli
        nf.memory_mb += memory_mb
        if nf.node.schedulable:
            self.free_cpu_milli += cpu_milli
            self.free_memory_mb += memory_mb

    def _move(self, nf: NodeFree, gpus: list[int], sign: int) -> None:
        """Re-bucket `nf` after `gpus` become free (+1) or taken (-1)."""
        per_flavor: dict[str, int] = {}
        for i in gpus:
            flavor = nf.flavor_of[i]
            per_flavor[flavor] = per_flavor.get(flavor, 0) + sign
        indexed, name = nf.node.schedulable, nf.node.name
        for flavor, delta in per_flavor.items():
            before = nf.free_by_flavor[flavor]
            nf.free_by_flavor[flavor] = before + delta
            if indexed:
                self.free_by_flavor[flavor] += delta
                _rebucket(self.buckets[flavor], name, before, before + delta)
        if indexed:
            before = len(nf.free_gpus)
            _rebucket(self.buckets[ANY], name, before, before + sign * len(gpus))


def _rebucket(buckets: list[list[str]], name: str, before: int, after: int) -> None:
    """Move `name` from bucket `before` to bucket `after`, each kept in name order."""
    old = buckets[before]
    del old[bisect_left(old, name)]
    insort(buckets[after], name)
