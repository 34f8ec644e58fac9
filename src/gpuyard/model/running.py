"""What the scheduler needs to know of a running job and of a tenant's consumption.

`RunningJob` is the running side of `JobDemand`: where its tasks are, since when, and how it
was admitted (`borrowed`: per resource, how much it took beyond its tenant's guarantee; empty
for a guaranteed job). `TenantUsage` is a tenant's GPU-hours in the current budget period.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuyard.model.demand import PriorityClass, standing
from gpuyard.model.placement import TaskPlacement
from gpuyard.model.value import Value


@dataclass(frozen=True, slots=True, init=False)
class RunningJob(Value):
    """A job that holds resources (bound, starting, running or stopping).

    `terminating`: a stop (preemption, cancel, timeout) was already sent; its resources will
    come back within its grace period. `preemptible=False` protects it from any preemption.
    `attained_gpu_s`: GPU-seconds received in earlier attempts (LAS adds this attempt's).
    `oracle_end_at`: when it will end if not stopped (simulation only, SRTF); None live.
    `expected_runtime_s`: its expected run time in all (`JobDemand.expected_runtime_s`).
    `preemptions`: how many times it was preempted before this attempt.
    `priority_class`: `PriorityClass` (`JobDemand.priority_class`).
    """

    job_id: str
    tenant: str
    placements: tuple[TaskPlacement, ...]
    started_at: float
    priority: int
    owner: str | None
    borrowed: tuple[tuple[str, int], ...]
    max_runtime_s: int | None
    preemptible: bool
    terminating: bool
    attained_gpu_s: float
    oracle_end_at: float | None
    expected_runtime_s: float | None
    preemptions: int
    priority_class: PriorityClass

    def __init__(
        self,
        job_id: str,
        tenant: str,
        placements: tuple[TaskPlacement, ...],
        started_at: float,
        priority: int = 0,
        owner: str | None = None,
        borrowed: tuple[tuple[str, int], ...] = (),
        max_runtime_s: int | None = None,
        preemptible: bool = True,
        terminating: bool = False,
        attained_gpu_s: float = 0.0,
        oracle_end_at: float | None = None,
        expected_runtime_s: float | None = None,
        preemptions: int = 0,
        priority_class: PriorityClass = PriorityClass.NORMAL,
    ) -> None:  # by hand: compiled, it is built natively (docs/sim.md, Fast replays)
        object.__setattr__(self, "job_id", job_id)
        object.__setattr__(self, "tenant", tenant)
        object.__setattr__(self, "placements", placements)
        object.__setattr__(self, "started_at", started_at)
        object.__setattr__(self, "priority", priority)
        object.__setattr__(self, "owner", owner)
        object.__setattr__(self, "borrowed", borrowed)
        object.__setattr__(self, "max_runtime_s", max_runtime_s)
        object.__setattr__(self, "preemptible", preemptible)
        object.__setattr__(self, "terminating", terminating)
        object.__setattr__(self, "attained_gpu_s", attained_gpu_s)
        object.__setattr__(self, "oracle_end_at", oracle_end_at)
        object.__setattr__(self, "expected_runtime_s", expected_runtime_s)
        object.__setattr__(self, "preemptions", preemptions)
        object.__setattr__(self, "priority_class", priority_class)

    @property
    def standing(self) -> int:
        """Its class, then its priority: compared only inside its tenant."""
        return standing(self.priority_class, self.priority)

    @property
    def opportunistic_class(self) -> bool:
        return self.priority_class is PriorityClass.OPPORTUNISTIC

    @property
    def opportunistic(self) -> bool:
        return any(amount > 0 for _, amount in self.borrowed)

    @property
    def gpus(self) -> int:
        """Whole GPUs held (shared tasks hold part of one GPU and count 0 here)."""
        return sum(t.whole_gpus for t in self.placements)

    @property
    def deadline(self) -> float | None:
        """When maxRuntime ends it at the latest; None without a maxRuntime."""
        if self.max_runtime_s is None:
            return None
        return self.started_at + self.max_runtime_s


@dataclass(frozen=True, slots=True)
class TenantUsage(Value):
    """GPU-hours a tenant used in its current budget period, and when that period ends."""

    gpu_hours: float = 0.0
    period_ends_at: float | None = None
