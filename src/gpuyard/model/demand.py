"""What a queued job asks of the cluster, in the scheduler's terms (built from a job spec)."""

from __future__ import annotations

from dataclasses import dataclass

from gpuyard.model.resources import Resources


@dataclass(frozen=True, slots=True)
class TaskDemand:
    role: str
    index: int
    resources: Resources
    gpu_type: str | None = None


@dataclass(frozen=True, slots=True)
class JobDemand:
    """A job waiting for placement. `seq` is the submission order (ties broken by it)."""

    job_id: str
    tenant: str
    priority: int
    seq: int
    tasks: tuple[TaskDemand, ...]

    @property
    def total(self) -> Resources:
        out = Resources()
        for t in self.tasks:
            out = out + t.resources
        return out
