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
    """A job waiting for placement. `seq` is the submission order (ties broken by it).

    `submitted_at`: when this attempt entered the queue (aging and FIFO use it).
    `attained_gpu_s`: GPU-seconds the job received in its earlier attempts (LAS uses it).
    `max_runtime_s`: the spec's maxRuntime, None when unlimited.
    `oracle_duration_s`: how long this attempt will run once started (simulation only: the
    SJF/SRTF oracle baselines read it); None live.
    """

    job_id: str
    tenant: str
    priority: int
    seq: int
    tasks: tuple[TaskDemand, ...]
    owner: str | None = None
    submitted_at: float = 0.0
    attained_gpu_s: float = 0.0
    max_runtime_s: int | None = None
    oracle_duration_s: float | None = None

    @property
    def total(self) -> Resources:
        out = Resources()
        for t in self.tasks:
            out = out + t.resources
        return out
