"""Which job shapes can never run on this cluster, even idle: a cache per shape.

A shape is a job's tasks without its identity (role, resources, GPU type, GPU share). The
answer only changes with the nodes, so it is kept until they change. Most shapes fit; the reasons of
those that do not come from `explain_no_fit`, computed once per shape.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuyard.model import GpuShare, JobDemand, Node, Resources, gpu_type_matches
from gpuyard.scheduler.packing import place_gang
from gpuyard.scheduler.placement import explain_no_fit
from gpuyard.scheduler.reasons import PendingReason
from gpuyard.scheduler.snapshot import ClusterSnapshot

Shape = tuple[tuple[str, Resources, str | None, GpuShare | None], ...]


def shape_of(job: JobDemand) -> Shape:
    return tuple((t.role, t.resources, t.gpu_type, t.gpu_share) for t in job.tasks)


def matching_flavors(job: JobDemand, flavors: Sequence[str]) -> list[str | None]:
    """GPU flavors every GPU task of `job` accepts; [None] for a job without GPUs."""
    types = {t.gpu_type for t in job.tasks if t.uses_gpu}
    if not types:
        return [None]
    return [f for f in flavors if all(gpu_type_matches(t, f) for t in types)]


class ShapeFits:
    def __init__(self) -> None:
        self._nodes: tuple[Node, ...] = ()
        self._idle: ClusterSnapshot | None = None
        self._never: dict[Shape, PendingReason | None] = {}

    def sync(self, nodes: Sequence[Node], changed: bool) -> None:
        if changed:
            self._nodes = tuple(n for n in nodes if n.schedulable)
            self._idle = None
            self._never = {}

    def never(self, job: JobDemand) -> PendingReason | None:
        """Why `job` cannot run even on the idle cluster; None when it can. A job without
        gang allocation can when each of its tasks can on its own."""
        if not job.gang and len(job.tasks) > 1:
            kinds = {(t.resources, t.gpu_type, t.gpu_share): t for t in job.tasks}
            for t in kinds.values():
                reason = self.never(job.with_tasks((t,)))
                if reason is not None:
                    return reason
            return None
        shape = shape_of(job)
        if shape not in self._never:
            self._never[shape] = self._compute(job)
        return self._never[shape]

    def _compute(self, job: JobDemand) -> PendingReason | None:
        if self._idle is None:
            self._idle = ClusterSnapshot(self._nodes)
        for flavor in matching_flavors(job, self._idle.flavors):
            if place_gang(self._idle, job, flavor) is not None:
                return None
        return explain_no_fit(self._idle, job)
