"""Node response bodies."""

from __future__ import annotations

from gpuyard.api.schemas.common import Out


class GpuOut(Out):
    index: int
    uuid: str
    type: str
    memory_mb: int
    fake: bool
    healthy: bool
    busy: bool  # held by a task (`job` is null when the caller may not see that job)
    job: str | None
    utilization_pct: float | None = None  # from NVML; None for fake GPUs or without readings


class Allocated(Out):
    cpu: float
    memory_mb: int
    gpus: int


class NodeOut(Out):
    name: str
    cpu: float
    memory_mb: int
    schedulable: bool
    allocated: Allocated
    gpus: list[GpuOut]


class NodeList(Out):
    nodes: list[NodeOut]
