"""Gang placement on the indexed snapshot: every task placed, or none.

Rules, in order:
- one flavor per job: all its GPUs are of the flavor the caller chose;
- fewest nodes: a multi-task job first tries to fit on one node, then places its tasks
  biggest first, each on a node the job already uses when one has room;
- best-fit: otherwise a task goes to the node with the fewest free GPUs of the flavor that
  can hold it (walking the snapshot's buckets up from the size asked), so partly used nodes
  fill up and whole empty nodes stay free for big jobs. A task without GPUs prefers nodes
  with no free GPU at all;
- topology: inside a node a multi-GPU task takes GPUs of one NVLink/PCIe group, the
  smallest group that holds it; failing that, as few groups as possible;
- shared GPUs: a task with a GPU share packs onto a GPU already shared before it opens a
  free one (`sharing.shared_spot`); a whole-GPU task only ever takes free GPUs, never a
  shared one (the snapshot keeps shared GPUs out of `free_gpus`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gpuyard.model import JobDemand, JobPlacement, Resources, TaskDemand, TaskPlacement
from gpuyard.scheduler.sharing import shared_spot
from gpuyard.scheduler.snapshot import ANY, ClusterSnapshot, NodeFree, Undo


def place_gang(
    snapshot: ClusterSnapshot, job: JobDemand, flavor: str | None
) -> JobPlacement | None:
    """Place all tasks of `job` on GPUs of `flavor`, leaving the snapshot unchanged."""
    tasks = sorted(job.tasks, key=_size_key)
    placed = _on_one_node(snapshot, tasks, job.total, flavor) if len(tasks) > 1 else None
    if placed is None:
        placed = _task_by_task(snapshot, tasks, flavor)
    if placed is None:
        return None
    roles = {role: n for n, role in enumerate(dict.fromkeys(t.role for t in job.tasks))}
    placed.sort(key=lambda t: (roles[t.role], t.index))
    return JobPlacement(job.job_id, tuple(placed))


class FreeCounts:
    """A count bound on placing `job`'s whole-GPU tasks on GPUs of `flavor`: free GPUs per
    node and, per task size s, Σ ⌊free / s⌋ (a node with f free hosts at most ⌊f/s⌋ tasks of
    s GPUs). `possible()` is False when the tasks of s GPUs or more outnumber that sum for
    some s, i.e. when no placement exists; kept up to date as victims leave one by one, so a
    trial placement after a removal is only tried once one can exist."""

    def __init__(self, snapshot: ClusterSnapshot, job: JobDemand, flavor: str | None) -> None:
        sizes = sorted(
            (t.resources.gpus for t in job.tasks if t.gpu_share is None and t.resources.gpus),
            reverse=True,
        )
        self.snapshot, self.flavor = snapshot, flavor
        self.need_total = sum(sizes)
        self.need = {s: n for n, s in enumerate(sizes, 1)}  # size → tasks of ≥ that size
        buckets = snapshot.buckets.get(flavor or ANY, []) if sizes else []
        self.free = {n: c for c in range(1, len(buckets)) for n in buckets[c]}
        self.total = sum(self.free.values())
        self.room = {s: sum(f // s for f in self.free.values()) for s in self.need}
        self._freed: dict[str, set[int]] = {}  # GPUs counted free by `free_too`, per node

    def possible(self) -> bool:
        return self.total >= self.need_total and all(
            self.room[s] >= n for s, n in self.need.items()
        )

    def update(self, nodes: Iterable[str]) -> None:
        """Read again the free GPUs of `nodes` (after a release there)."""
        if not self.need:
            return
        for name in nodes:
            nf = self.snapshot.nodes.get(name)
            if nf is None or not nf.node.schedulable:
                continue
            new = nf.free_by_flavor.get(self.flavor, 0) if self.flavor else len(nf.free_gpus)
            self._set(name, new)

    def releases_needed(self, releases: Iterable[Iterable[TaskPlacement]]) -> int | None:
        """How many of `releases` (each the tasks one job holds) must be counted free, in
        order, before the bound holds (0: it holds already); None: not even all of them."""
        if self.possible():
            return 0
        for n, tasks in enumerate(releases, 1):
            for t in tasks:
                self.free_too(t.node, t.gpu_indices)
            if self.possible():
                return n
        return None

    def count_free(self, more: Mapping[str, int]) -> None:
        """Count `more[node]` GPUs of node `node` as free too (a what-if, the snapshot
        untouched; the caller counts only GPUs held now, of the flavor, on schedulable
        nodes). A GPU counted twice makes the bound looser, never wrong."""
        if self.need:
            for name, n in more.items():
                self._set(name, self.free.get(name, 0) + n)

    def free_too(self, name: str, gpus: Iterable[int]) -> None:
        """Count `gpus` of node `name` as free too (a what-if, the snapshot untouched): those
        of the flavor that are held now and not counted by an earlier call. A GPU that
        another holder keeps is counted all the same, so the bound stays an upper one."""
        nf = self.snapshot.nodes.get(name)
        if not self.need or nf is None or not nf.node.schedulable:
            return
        counted = self._freed.setdefault(name, set())
        more = {
            i
            for i in gpus
            if i in nf.flavor_of
            and i not in nf.free_gpus
            and i not in counted
            and (self.flavor is None or nf.flavor_of[i] == self.flavor)
        }
        if more:
            counted |= more
            self._set(name, self.free.get(name, 0) + len(more))

    def _set(self, name: str, new: int) -> None:
        old = self.free.get(name, 0)
        if new != old:
            self.free[name] = new
            self.total += new - old
            for s in self.room:
                self.room[s] += new // s - old // s


def _on_one_node(
    snapshot: ClusterSnapshot, tasks: list[TaskDemand], total: Resources, flavor: str | None
) -> list[TaskPlacement] | None:
    nf = _best_node(snapshot, total, flavor)
    if nf is None:
        return None
    return _place_all(snapshot, tasks, flavor, [nf], use_index=False)


def _task_by_task(
    snapshot: ClusterSnapshot, tasks: list[TaskDemand], flavor: str | None
) -> list[TaskPlacement] | None:
    return _place_all(snapshot, tasks, flavor, [], use_index=True)


def _place_all(
    snapshot: ClusterSnapshot,
    tasks: list[TaskDemand],
    flavor: str | None,
    used: list[NodeFree],
    use_index: bool,
) -> list[TaskPlacement] | None:
    undos: list[Undo] = []
    placed: list[TaskPlacement] = []
    try:
        for task in tasks:
            tp = _place_one(snapshot, task, flavor, used, use_index)
            if tp is None:
                return None
            placed.append(tp)
            undos.append(snapshot.assume_task(tp))
    finally:
        for undo in reversed(undos):
            undo()
    return placed


def _place_one(
    snapshot: ClusterSnapshot,
    task: TaskDemand,
    flavor: str | None,
    used: list[NodeFree],
    use_index: bool,
) -> TaskPlacement | None:
    if task.gpu_share is not None:
        spot = shared_spot(snapshot, used, task, flavor, anywhere=use_index)
        if spot is None:
            return None
        shared, gpu, memory_mb = spot
        if all(u is not shared for u in used):
            used.append(shared)
        node = shared.node.name
        return TaskPlacement(task.role, task.index, node, (gpu,), task.resources, memory_mb)
    nf = _best_among(used, task.resources, flavor)
    if nf is None and use_index:
        nf = _best_node(snapshot, task.resources, flavor)
        if nf is not None:
            used.append(nf)
    if nf is None:
        return None
    gpus = _choose_gpus(nf, task, flavor)
    return TaskPlacement(task.role, task.index, nf.node.name, gpus, task.resources)


def _best_node(snapshot: ClusterSnapshot, need: Resources, flavor: str | None) -> NodeFree | None:
    """The schedulable node with the fewest free GPUs (of `flavor`) that holds `need`."""
    buckets = snapshot.buckets.get(flavor if need.gpus and flavor else ANY, ())
    for count in range(need.gpus, len(buckets)):
        for name in buckets[count]:
            nf = snapshot.nodes[name]
            if nf.cpu_milli >= need.cpu_milli and nf.memory_mb >= need.memory_mb:
                return nf
    return None


def _best_among(used: Iterable[NodeFree], need: Resources, flavor: str | None) -> NodeFree | None:
    best: NodeFree | None = None
    for nf in used:
        free = _free_count(nf, flavor, need.gpus)
        if free < need.gpus or nf.cpu_milli < need.cpu_milli or nf.memory_mb < need.memory_mb:
            continue
        if best is None or free < _free_count(best, flavor, need.gpus):
            best = nf
    return best


def _free_count(nf: NodeFree, flavor: str | None, gpus: int) -> int:
    if gpus and flavor:
        return nf.free_by_flavor.get(flavor, 0)
    return len(nf.free_gpus)


def _choose_gpus(nf: NodeFree, task: TaskDemand, flavor: str | None) -> tuple[int, ...]:
    """`need` GPUs of `flavor` on `nf`: inside one topology group when one holds them."""
    need = task.resources.gpus
    if need == 0:
        return ()
    free = sorted(i for i in nf.free_gpus if flavor is None or nf.flavor_of[i] == flavor)
    groups: dict[int | None, list[int]] = {}
    for i in free:
        groups.setdefault(nf.group_of[i], []).append(i)
    if len(groups) == 1:
        return tuple(free[:need])
    holding = [g for g in groups.values() if len(g) >= need]
    if holding:
        return tuple(min(holding, key=lambda g: (len(g), g[0]))[:need])
    chosen: list[int] = []
    for group in sorted(groups.values(), key=lambda g: (-len(g), g[0])):
        chosen.extend(group[: need - len(chosen)])
        if len(chosen) == need:
            break
    return tuple(sorted(chosen))


def _size_key(task: TaskDemand) -> tuple[int, int, int, str, int]:
    r = task.resources
    return (-r.gpus, -r.cpu_milli, -r.memory_mb, task.role, task.index)
