"""Gang placement of one job on a snapshot: every task placed, or none; best-fit packing.

Tasks are placed biggest first. Each goes to the node that it leaves with the least free
(GPUs, then CPU, then memory), so big holes stay whole for big jobs. GPUs are taken by the
lowest index among those of the asked type. A task with a GPU share goes where
`sharing.shared_spot` says, on the first GPU flavor of its type that has room.
"""

from __future__ import annotations

from gpuyard.model import (
    JobDemand,
    JobPlacement,
    Node,
    TaskDemand,
    TaskPlacement,
    gpu_type_matches,
)
from gpuyard.scheduler.reasons import PendingCode, PendingReason
from gpuyard.scheduler.sharing import shared_spot, shared_words
from gpuyard.scheduler.snapshot import ClusterSnapshot, NodeFree, Undo


def place_job(snapshot: ClusterSnapshot, job: JobDemand) -> JobPlacement | None:
    """Place all tasks of `job` on `snapshot`, leaving it unchanged. None if the gang fails."""
    undos: list[Undo] = []
    placed: list[TaskPlacement] = []
    try:
        for task in sorted(job.tasks, key=_size_key):
            tp = _place_task(snapshot, task)
            if tp is None:
                return None
            placed.append(tp)
            undos.append(snapshot.assume_task(tp))
    finally:
        for undo in reversed(undos):
            undo()
    placed.sort(key=lambda t: (_role_order(job, t.role), t.index))
    return JobPlacement(job.job_id, tuple(placed))


def explain_no_fit(snapshot: ClusterSnapshot, job: JobDemand) -> PendingReason:
    """Why `job` does not fit now: never (bigger than the cluster) or not yet (busy)."""
    nodes = [nf.node for nf in snapshot.schedulable()]
    if not nodes:
        return PendingReason(PendingCode.NO_NODES, "no schedulable node is available")
    empty = ClusterSnapshot(nodes)
    tasks = sorted(job.tasks, key=_size_key)
    for task in tasks:
        if task.uses_gpu and not any(_matching_gpus(n, task) for n in nodes):
            return PendingReason(PendingCode.NO_GPU_TYPE, _no_type_message(task, nodes))
        if _place_task(empty, task) is None:
            return PendingReason(PendingCode.EXCEEDS_NODE, _shortfall(task, empty, idle=True))
    if place_job(empty, job) is None:
        return PendingReason(
            PendingCode.EXCEEDS_NODE,
            f"needs {job.total.gpus} GPUs, {job.total.cpu:g} CPUs and {job.total.memory_mb} MB "
            f"for its {len(job.tasks)} tasks at once; the whole cluster cannot hold them",
        )
    for task in tasks:
        if _place_task(snapshot, task) is None:
            return PendingReason(PendingCode.INSUFFICIENT, _shortfall(task, snapshot, idle=False))
    return PendingReason(
        PendingCode.INSUFFICIENT,
        f"needs {job.total.gpus} GPUs, {job.total.cpu:g} CPUs and {job.total.memory_mb} MB "
        f"for its {len(job.tasks)} tasks at once; not enough is free together",
    )


def _place_shared(snapshot: ClusterSnapshot, task: TaskDemand) -> TaskPlacement | None:
    for flavor in snapshot.flavors:
        if not gpu_type_matches(task.gpu_type, flavor):
            continue
        spot = shared_spot(snapshot, [], task, flavor, anywhere=True)
        if spot is not None:
            nf, gpu, memory_mb = spot
            return TaskPlacement(
                task.role, task.index, nf.node.name, (gpu,), task.resources, memory_mb
            )
    return None


def _place_task(snapshot: ClusterSnapshot, task: TaskDemand) -> TaskPlacement | None:
    if task.gpu_share is not None:
        return _place_shared(snapshot, task)
    best: tuple[tuple[int, int, int, str], NodeFree, list[int]] | None = None
    need = task.resources
    for nf in snapshot.schedulable():
        if need.cpu_milli > nf.cpu_milli or need.memory_mb > nf.memory_mb:
            continue
        gpus = sorted(i for i in nf.free_gpus if _gpu_ok(nf.node, i, task))
        if len(gpus) < need.gpus:
            continue
        key = (
            len(nf.free_gpus) - need.gpus,
            nf.cpu_milli - need.cpu_milli,
            nf.memory_mb - need.memory_mb,
            nf.node.name,
        )
        if best is None or key < best[0]:
            best = (key, nf, gpus[: need.gpus])
    if best is None:
        return None
    _, nf, chosen = best
    return TaskPlacement(task.role, task.index, nf.node.name, tuple(chosen), need)


def _gpu_ok(node: Node, index: int, task: TaskDemand) -> bool:
    return gpu_type_matches(task.gpu_type, node.gpu(index).type)


def _matching_gpus(node: Node, task: TaskDemand) -> list[int]:
    return [g.index for g in node.gpus if g.healthy and gpu_type_matches(task.gpu_type, g.type)]


def _size_key(task: TaskDemand) -> tuple[int, int, int, str, int]:
    r = task.resources
    return (-r.gpus, -r.cpu_milli, -r.memory_mb, task.role, task.index)


def _role_order(job: JobDemand, role: str) -> int:
    roles = list(dict.fromkeys(t.role for t in job.tasks))
    return roles.index(role)


def _type_words(task: TaskDemand) -> str:
    return f" of type {task.gpu_type}" if task.gpu_type else ""


def _no_type_message(task: TaskDemand, nodes: list[Node]) -> str:
    types = sorted({g.label for n in nodes for g in n.gpus}) or ["none"]
    return (
        f"task {task.role}/{task.index} needs GPUs of type {task.gpu_type}; "
        f"the cluster has: {', '.join(types)}"
    )


def _shortfall(task: TaskDemand, snapshot: ClusterSnapshot, idle: bool) -> str:
    """The first dimension in which no single node can hold `task`, with the best on offer."""
    need, nodes = task.resources, snapshot.schedulable()
    words = "no node has more than" if idle else "at most"
    tail = "" if idle else " free"
    where = f"task {task.role}/{task.index}"
    if task.gpu_share is not None and _host_room(task, nodes):
        return f"{where} {shared_words(snapshot, task, idle)}"
    cpu_ok = [nf for nf in nodes if nf.cpu_milli >= need.cpu_milli]
    mem_ok = [nf for nf in cpu_ok if nf.memory_mb >= need.memory_mb]
    best_gpus = max((len(_free_matching(nf, task)) for nf in (mem_ok or nodes)), default=0)
    if need.gpus and best_gpus < need.gpus:
        gpus = f"{need.gpus} GPUs{_type_words(task)}"
        shared = len(snapshot.shared)
        held = f" ({shared} GPUs are in shared mode: whole-GPU tasks never use them)"
        return f"{where} needs {gpus} on one node; {words} {best_gpus}{tail}" + (
            held if shared and not idle else ""
        )
    if not cpu_ok:
        best_cpu = max(nf.cpu_milli for nf in nodes) / 1000
        return f"{where} needs {need.cpu:g} CPUs on one node; {words} {best_cpu:g}{tail}"
    best_mem = max(nf.memory_mb for nf in cpu_ok)
    return f"{where} needs {need.memory_mb} MB of memory on one node; {words} {best_mem} MB{tail}"


def _host_room(task: TaskDemand, nodes: list[NodeFree]) -> bool:
    need = task.resources
    return any(nf.cpu_milli >= need.cpu_milli and nf.memory_mb >= need.memory_mb for nf in nodes)


def _free_matching(nf: NodeFree, task: TaskDemand) -> list[int]:
    return [i for i in nf.free_gpus if _gpu_ok(nf.node, i, task)]
