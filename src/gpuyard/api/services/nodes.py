"""What the node endpoint shows: each node, what is allocated on it and which job holds
each GPU (if the caller may see that job)."""

from __future__ import annotations

from gpuyard.api.schemas import Allocated, GpuOut, NodeList, NodeOut
from gpuyard.controller import Controller
from gpuyard.model import GpuDevice


def node_list(ctl: Controller, visible: frozenset[str] | None) -> NodeList:
    """Every node; a GPU's `job` is named only if it is of a `visible` tenant (None: all)."""
    active = ctl.store.jobs.active_tasks()
    shown = _shown_jobs(ctl, {t.job_id for t in active}, visible)
    out = []
    for node in ctl.engine.nodes():
        mine = [t for t in active if t.node == node.name]
        holder = {i: t.job_id for t in mine for i in t.gpus}
        gpus = [
            GpuOut(
                index=g.index,
                uuid=g.uuid,
                type=g.type,
                memory_mb=g.memory_mb,
                fake=g.fake,
                healthy=g.healthy,
                busy=g.index in holder,
                job=holder.get(g.index) if holder.get(g.index) in shown else None,
                utilization_pct=_utilization(ctl, g),
            )
            for g in node.gpus
        ]
        allocated = Allocated(
            cpu=sum(t.cpu_milli for t in mine) / 1000,
            memory_mb=sum(t.memory_mb for t in mine),
            gpus=len(holder),
        )
        out.append(
            NodeOut(
                name=node.name,
                cpu=node.cpu_milli / 1000,
                memory_mb=node.memory_mb,
                schedulable=node.schedulable,
                allocated=allocated,
                gpus=gpus,
            )
        )
    return NodeList(nodes=out)


def _shown_jobs(ctl: Controller, job_ids: set[str], visible: frozenset[str] | None) -> set[str]:
    if visible is None:
        return job_ids
    jobs = (ctl.store.jobs.get(j) for j in job_ids)
    return {j.id for j in jobs if j is not None and j.tenant in visible}


def _utilization(ctl: Controller, gpu: GpuDevice) -> float | None:
    read = ctl.gpu_utilization
    return None if gpu.fake or read is None else read(gpu)
