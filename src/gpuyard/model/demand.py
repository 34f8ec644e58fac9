"""What a queued job asks of the cluster, in the scheduler's terms (built from a job spec)."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuyard.model.resources import Resources
from gpuyard.model.value import Value


@dataclass(frozen=True, slots=True)
class GpuShare(Value):
    """A task's part of ONE shared GPU: `memory_mb` of its memory, or `milli` thousandths of
    it (`gpuNumber: 0.5` → 500), and an optional compute share for MPS (1–100 %).

    Exactly one of `memory_mb` and `milli` is > 0. A fraction becomes MB only once the GPU is
    known: `memory_on(gpu.memory_mb)` rounds down to whole MB (docs/gpu-sharing.md).
    """

    memory_mb: int = 0
    milli: int = 0
    compute_percent: int | None = None

    def memory_on(self, gpu_memory_mb: int) -> int:
        """MB this share takes on a GPU with `gpu_memory_mb` of memory (at least 1)."""
        if self.memory_mb:
            return self.memory_mb
        return max(1, gpu_memory_mb * self.milli // 1000)


@dataclass(frozen=True, slots=True)
class TaskDemand(Value):
    """One task. `resources.gpus` counts whole GPUs; a task with a `gpu_share` asks for no
    whole GPU but for part of one GPU in shared mode (never both)."""

    role: str
    index: int
    resources: Resources
    gpu_type: str | None = None
    gpu_share: GpuShare | None = None

    @property
    def uses_gpu(self) -> bool:
        return self.resources.gpus > 0 or self.gpu_share is not None


@dataclass(frozen=True, slots=True)
class JobDemand(Value):
    """A job waiting for placement. `seq` is the submission order (ties broken by it).

    `submitted_at`: when this attempt entered the queue (aging and FIFO use it).
    `attained_gpu_s`: GPU-seconds the job received in its earlier attempts (LAS uses it).
    `max_runtime_s`: the spec's maxRuntime, None when unlimited.
    `oracle_duration_s`: how long this attempt will run once started (simulation only: the
    SJF/SRTF oracle baselines read it); None live.
    `expected_runtime_s`: how long the job is expected to run in all, learned from its
    user's (and job name's) past runs (live) or the trace's history (simulation); None when
    nothing is known. Never trusted to end a job: it only orders backfill and ETAs.
    `preemptions`: how many times the job was preempted so far.
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
    expected_runtime_s: float | None = None
    preemptions: int = 0
    total: Resources = field(init=False, repr=False, compare=False)  # of all its tasks

    def __post_init__(self) -> None:
        out = Resources()
        for t in self.tasks:
            out = out + t.resources
        object.__setattr__(self, "total", out)
