"""Where a shared-GPU task goes (docs/gpu-sharing.md): pure choices over the snapshot.

A task with a `GpuShare` takes memory on ONE GPU in shared mode. It goes, in order:
1. onto a GPU already shared that has room — best fit: the one its memory leaves with the
   least free memory (ties: node name, GPU index), nodes the job already uses first;
2. else onto a free GPU of the flavor, opened in shared mode — on a node the job uses, else
   on the node with the fewest free GPUs of the flavor (best fit, as for whole GPUs), and
   inside the node in the topology group with the fewest free GPUs (whole groups stay whole).
A GPU whose memory is smaller than the ask never holds it.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpuyard.model import JobDemand, TaskDemand, gpu_type_matches
from gpuyard.scheduler.snapshot import ClusterSnapshot, NodeFree

Spot = tuple[NodeFree, int, int]  # node, GPU index, MB taken there


def shared_spot(
    snapshot: ClusterSnapshot,
    used: list[NodeFree],
    task: TaskDemand,
    flavor: str | None,
    anywhere: bool,
) -> Spot | None:
    """Where `task` (with a gpu_share) goes; `anywhere=False` keeps it on `used` nodes."""
    if flavor is None or task.gpu_share is None:
        return None
    spot = best_shared_gpu(used, task, flavor)
    if spot is None and anywhere:
        names = dict.fromkeys(name for name, _ in snapshot.shared)
        spot = best_shared_gpu((snapshot.nodes[n] for n in names), task, flavor)
    if spot is None:
        spot = next((s for nf in used if (s := open_gpu(nf, task, flavor))), None)
    if spot is None and anywhere:
        spot = _open_best_node(snapshot, task, flavor)
    return spot


def best_shared_gpu(nodes: Iterable[NodeFree], task: TaskDemand, flavor: str) -> Spot | None:
    """The shared GPU of `flavor` among `nodes` that `task` fills best."""
    share = task.gpu_share
    assert share is not None
    best: tuple[tuple[int, str, int], Spot] | None = None
    for nf in nodes:
        if not (nf.node.schedulable and _host_fits(nf, task)):
            continue
        for i, free in nf.shared.items():
            need = share.memory_on(nf.memory_of[i])
            if nf.flavor_of[i] != flavor or need > free:
                continue
            key = (free - need, nf.node.name, i)
            if best is None or key < best[0]:
                best = (key, (nf, i, need))
    return best[1] if best else None


def open_gpu(nf: NodeFree, task: TaskDemand, flavor: str) -> Spot | None:
    """A free GPU of `flavor` on `nf` to open in shared mode for `task`, or None."""
    share = task.gpu_share
    if share is None or not (nf.node.schedulable and _host_fits(nf, task)):
        return None
    free = [
        i
        for i in nf.free_gpus
        if nf.flavor_of[i] == flavor and share.memory_on(nf.memory_of[i]) <= nf.memory_of[i]
    ]
    if not free:
        return None
    group_size: dict[int | None, int] = {}
    for i in free:
        group_size[nf.group_of[i]] = group_size.get(nf.group_of[i], 0) + 1
    i = min(free, key=lambda i: (group_size[nf.group_of[i]], i))
    return (nf, i, share.memory_on(nf.memory_of[i]))


def _open_best_node(snapshot: ClusterSnapshot, task: TaskDemand, flavor: str) -> Spot | None:
    buckets = snapshot.buckets.get(flavor, ())
    for count in range(1, len(buckets)):
        for name in buckets[count]:
            spot = open_gpu(snapshot.nodes[name], task, flavor)
            if spot is not None:
                return spot
    return None


def _host_fits(nf: NodeFree, task: TaskDemand) -> bool:
    need = task.resources
    return nf.cpu_milli >= need.cpu_milli and nf.memory_mb >= need.memory_mb


def shared_words(snapshot: ClusterSnapshot, task: TaskDemand, idle: bool) -> str:
    """Why a shared task has no spot: `needs 30000 MB of one A100 GPU; ...`."""
    share = task.gpu_share
    assert share is not None
    gpus = [
        (nf, i)
        for nf in snapshot.schedulable()
        for i in nf.flavor_of
        if gpu_type_matches(task.gpu_type, nf.flavor_of[i])
    ]
    asked = (
        f"{share.memory_mb} MB" if share.memory_mb else f"{share.milli / 1000:g} of the memory"
    )
    kind = f" {task.gpu_type}" if task.gpu_type else ""
    if idle:
        largest = max((nf.memory_of[i] for nf, i in gpus), default=0)
        return f"needs {asked} of one{kind} GPU; the largest GPU has {largest} MB"
    room = max((nf.shared[i] for nf, i in gpus if i in nf.shared), default=0)
    free = sum(1 for nf, i in gpus if i in nf.free_gpus)
    shared = sum(1 for nf, i in gpus if i in nf.shared)
    return (
        f"needs {asked} of one{kind} GPU; {shared} shared GPUs have at most {room} MB free "
        f"and {free} GPUs are free"
    )


def shared_shortfall(snapshot: ClusterSnapshot, job: JobDemand, flavor: str | None) -> str | None:
    """Why one of `job`'s shared tasks has no GPU to go to now; None when each has one."""
    for task in job.tasks:
        if task.gpu_share is not None and shared_spot(snapshot, [], task, flavor, True) is None:
            return f"task {task.role}/{task.index} {shared_words(snapshot, task, idle=False)}"
    return None


def shared_count(snapshot: ClusterSnapshot, flavor: str | None) -> int:
    """GPUs of `flavor` in shared mode on schedulable nodes (closed to whole-GPU tasks)."""
    return sum(1 for name, i in snapshot.shared if snapshot.nodes[name].flavor_of[i] == flavor)
