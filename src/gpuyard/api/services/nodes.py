"""What the node endpoints show and do: each node, its cordon, what is allocated on it, and
who holds each GPU (named only if the caller may see that job); cordon, drain, uncordon."""

from __future__ import annotations

from collections import defaultdict

from gpuyard.api.errors import InvalidInput
from gpuyard.api.schemas import (
    Allocated,
    CordonIn,
    CordonOut,
    GpuOut,
    GpuUser,
    NodeList,
    NodeOut,
    iso,
)
from gpuyard.controller import Controller
from gpuyard.model import CordonState, GpuDevice, Node, NodeCordon
from gpuyard.spec.errors import show
from gpuyard.spec.fields import as_seconds
from gpuyard.store import JobRecord, NodeRecord, TaskRecord

MAX_REASON_CHARS = 500
MAX_DRAIN_DEADLINE_S = 366 * 24 * 3600


def node_list(ctl: Controller, visible: frozenset[str] | None) -> NodeList:
    """Every node; a GPU's `job` is named only if it is of a `visible` tenant (None: all)."""
    active = ctl.store.jobs.active_tasks()
    jobs = _jobs(ctl, {t.job_id for t in active})
    shown = {j for j, job in jobs.items() if visible is None or job.tenant in visible}
    cordons = ctl.store.nodes.cordons()
    out = []
    for node in ctl.engine.nodes():
        mine = [t for t in active if t.node == node.name]
        out.append(_node_out(ctl, node, cordons.get(node.name), mine, jobs, shown))
    return NodeList(nodes=out)


def _node_out(
    ctl: Controller,
    node: Node,
    cordon: NodeCordon | None,
    tasks: list[TaskRecord],
    jobs: dict[str, JobRecord],
    shown: set[str],
) -> NodeOut:
    holders: dict[int, list[TaskRecord]] = defaultdict(list)
    for t in tasks:
        for i in t.gpus:
            holders[i].append(t)
    gpus = [_gpu_out(ctl, g, cordon, holders.get(g.index, []), jobs, shown) for g in node.gpus]
    allocated = Allocated(
        cpu=sum(t.cpu_milli for t in tasks) / 1000,
        memory_mb=sum(t.memory_mb for t in tasks),
        gpus=len(holders),
    )
    return NodeOut(
        name=node.name,
        address=node.address,
        state=str(cordon.state) if cordon else "ready",
        cpu=node.cpu_milli / 1000,
        memory_mb=node.memory_mb,
        schedulable=node.schedulable and cordon is None,
        cordon=cordon_out(cordon),
        allocated=allocated,
        gpus=gpus,
    )


def _gpu_out(
    ctl: Controller,
    g: GpuDevice,
    cordon: NodeCordon | None,
    holders: list[TaskRecord],
    jobs: dict[str, JobRecord],
    shown: set[str],
) -> GpuOut:
    users = [
        GpuUser(
            job=t.job_id if t.job_id in shown else None,
            tenant=jobs[t.job_id].tenant if t.job_id in shown and t.job_id in jobs else None,
            task=t.name if t.job_id in shown else None,
        )
        for t in holders
    ]
    first = users[0] if users else None
    return GpuOut(
        index=g.index,
        uuid=g.uuid,
        type=g.type,
        memory_mb=g.memory_mb,
        fake=g.fake,
        healthy=g.healthy,
        health_cause=g.health_cause,
        state=gpu_state(g, bool(holders), cordon),
        busy=bool(holders),
        job=first.job if first else None,
        tenant=first.tenant if first else None,
        users=users,
        utilization_pct=_utilization(ctl, g),
    )


def gpu_state(gpu: GpuDevice, used: bool, cordon: NodeCordon | None) -> str:
    """unhealthy, else used, else cordoned (free but no new work), else free."""
    if not gpu.healthy:
        return "unhealthy"
    if used:
        return "used"
    return "cordoned" if cordon is not None else "free"


def cordon_out(c: NodeCordon | None) -> CordonOut | None:
    if c is None:
        return None
    return CordonOut(
        state=str(c.state), reason=c.reason, by=c.by, at=iso(c.at), deadline=iso(c.deadline)
    )


def set_cordon(
    ctl: Controller, name: str, state: CordonState | None, body: CordonIn, by: str
) -> NodeRecord:
    """Cordon, drain or (state None) uncordon node `name`; the controller acts next cycle."""
    reason = (body.reason or "").strip() or None
    errors = []
    if reason is not None and len(reason) > MAX_REASON_CHARS:
        errors.append(("reason", f"must be at most {MAX_REASON_CHARS} characters long"))
    deadline = None
    if body.deadline is not None:
        seconds = as_seconds(body.deadline)
        if state is not CordonState.DRAINING:
            errors.append(("deadline", "only a drain has a deadline"))
        elif seconds is None or not 0 <= seconds <= MAX_DRAIN_DEADLINE_S:
            shown = show(body.deadline)
            errors.append(
                ("deadline", f"must be a duration like 30m, 2h or 90s, up to 366d, got {shown}")
            )
        else:
            deadline = ctl.clock.now() + seconds
    if errors:
        raise InvalidInput("; ".join(f"{path}: {message}" for path, message in errors), errors)
    record = ctl.store.nodes.cordon(name, state, by=by, reason=reason, deadline=deadline)
    ctl.wake()
    return record


def _jobs(ctl: Controller, job_ids: set[str]) -> dict[str, JobRecord]:
    found = (ctl.store.jobs.get(j) for j in job_ids)
    return {j.id: j for j in found if j is not None}


def _utilization(ctl: Controller, gpu: GpuDevice) -> float | None:
    read = ctl.gpu_utilization
    return None if gpu.fake or read is None else read(gpu)
