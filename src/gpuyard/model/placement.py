"""Where the tasks of a job go: a node and the indices of the GPUs it gets there."""

from __future__ import annotations

from dataclasses import dataclass

from gpuyard.model.resources import Resources


@dataclass(frozen=True, slots=True)
class TaskPlacement:
    role: str
    index: int
    node: str
    gpu_indices: tuple[int, ...]
    resources: Resources


@dataclass(frozen=True, slots=True)
class JobPlacement:
    job_id: str
    tasks: tuple[TaskPlacement, ...]

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(sorted({t.node for t in self.tasks}))
