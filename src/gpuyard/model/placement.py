"""Where the tasks of a job go: a node and the indices of the GPUs it gets there.

A task on whole GPUs holds them exclusively (`gpu_memory_mb == 0`). A shared task holds
`gpu_memory_mb` MB of the one GPU in `gpu_indices`, which is then in shared mode.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuyard.model.resources import Resources
from gpuyard.model.value import Value


@dataclass(frozen=True, slots=True, init=False)
class TaskPlacement(Value):
    role: str
    index: int
    node: str
    gpu_indices: tuple[int, ...]
    resources: Resources
    gpu_memory_mb: int  # > 0: a shared task, this much of its one GPU's memory

    def __init__(
        self,
        role: str,
        index: int,
        node: str,
        gpu_indices: tuple[int, ...],
        resources: Resources,
        gpu_memory_mb: int = 0,
    ) -> None:  # by hand: compiled, it is built natively (docs/sim.md, Fast replays)
        object.__setattr__(self, "role", role)
        object.__setattr__(self, "index", index)
        object.__setattr__(self, "node", node)
        object.__setattr__(self, "gpu_indices", gpu_indices)
        object.__setattr__(self, "resources", resources)
        object.__setattr__(self, "gpu_memory_mb", gpu_memory_mb)

    @property
    def shared(self) -> bool:
        return self.gpu_memory_mb > 0

    @property
    def whole_gpus(self) -> int:
        """GPUs held exclusively (0 for a shared task)."""
        return 0 if self.shared else len(self.gpu_indices)


@dataclass(frozen=True, slots=True, init=False)
class JobPlacement(Value):
    job_id: str
    tasks: tuple[TaskPlacement, ...]

    def __init__(
        self,
        job_id: str,
        tasks: tuple[TaskPlacement, ...],
    ) -> None:  # by hand: compiled, it is built natively (docs/sim.md, Fast replays)
        object.__setattr__(self, "job_id", job_id)
        object.__setattr__(self, "tasks", tasks)

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(sorted({t.node for t in self.tasks}))
