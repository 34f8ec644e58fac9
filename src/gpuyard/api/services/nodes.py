"""What the node endpoint shows: each node, what is allocated on it and who holds its GPUs."""

from __future__ import annotations

from gpuyard.api.schemas import Allocated, GpuOut, NodeList, NodeOut
from gpuyard.controller import Controller


def node_list(ctl: Controller) -> NodeList:
    active = ctl.store.jobs.active_tasks()
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
                job=holder.get(g.index),
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
