"""What a queued job asks of the cluster, in the scheduler's terms (built from a job spec)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from gpuyard.model.resources import Resources
from gpuyard.model.value import Value


class PriorityClass(enum.StrEnum):
    """A job's class (HiveD's prod > test > oppo; docs/scheduler.md, Priority classes).
    `prod` and `normal` order and preempt inside the job's tenant only, above any
    priority; `opportunistic` runs on idle capacity only (never within its tenant's
    guarantee, started only where no other job waits for the capacity) and is preempted
    first, by any other job of any tenant."""

    PROD = "prod"
    NORMAL = "normal"
    OPPORTUNISTIC = "opportunistic"


# a class outranks any priority: a step wider than the span of priorities (±1000)
CLASS_STEP = 10_000
OPPORTUNISTIC_BELOW = -CLASS_STEP // 2  # the standings of `opportunistic` jobs are below
_CLASS_RANK = {PriorityClass.OPPORTUNISTIC: -1, PriorityClass.NORMAL: 0, PriorityClass.PROD: 1}


def standing(priority_class: PriorityClass, priority: int) -> int:
    """Where a job stands inside its tenant: its class, then its priority (a `normal`
    job's standing is its priority). Compared only between jobs of one tenant."""
    return _CLASS_RANK[priority_class] * CLASS_STEP + priority


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
    `priority_class`: `PriorityClass` (its `standing` orders it inside its tenant).
    `gang`: all its tasks start together (the default); False (OpenPAI's `gangAllocation:
    false`): when they do not all fit, the most of them that fit now start (at least one)
    and the others wait (docs/scheduler.md, Jobs without gang allocation).
    `remainder`: these are the tasks not placed yet of a `gang=False` job that already runs
    (same `job_id`); admitting them adds tasks to that job. It never preempts anyone.
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
    priority_class: PriorityClass = PriorityClass.NORMAL
    gang: bool = True
    remainder: bool = False
    total: Resources = field(init=False, repr=False, compare=False)  # of all its tasks

    def __post_init__(self) -> None:
        out = Resources()
        for t in self.tasks:
            out = out + t.resources
        object.__setattr__(self, "total", out)

    @property
    def standing(self) -> int:
        return standing(self.priority_class, self.priority)

    @property
    def opportunistic_class(self) -> bool:
        return self.priority_class is PriorityClass.OPPORTUNISTIC

    def with_tasks(self, tasks: tuple[TaskDemand, ...]) -> JobDemand:
        """The same job asking for `tasks` only (a part of a `gang=False` job)."""
        return JobDemand(
            self.job_id,
            self.tenant,
            self.priority,
            self.seq,
            tasks,
            self.owner,
            self.submitted_at,
            self.attained_gpu_s,
            self.max_runtime_s,
            self.oracle_duration_s,
            self.expected_runtime_s,
            self.preemptions,
            self.priority_class,
            self.gang,
            self.remainder,
        )
