"""What one scrape exports, as plain values: read once per scrape by the API layer (from the
store, the engine, cgroups and NVML) and handed to `ClusterCollector`."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuyard.model import JobState
from gpuyard.runtime.gpustats import GpuSample


@dataclass(frozen=True, slots=True)
class TenantFlavor:
    """A tenant's GPUs of one flavor, as the queue view counts them."""

    tenant: str
    flavor: str
    guaranteed: int
    used: int
    borrowed: int
    lent: int


@dataclass(frozen=True, slots=True)
class TenantBudget:
    tenant: str
    period: str
    budget_gpu_hours: float
    used_gpu_hours: float


@dataclass(frozen=True, slots=True)
class QueueSample:
    """A tenant's queued jobs: how many, and how long the oldest has waited."""

    tenant: str
    length: int
    oldest_wait_s: float


@dataclass(frozen=True, slots=True)
class NodeSample:
    name: str
    up: bool
    schedulable: bool
    cpu_cores: float
    memory_bytes: int
    cpu_allocated_cores: float
    memory_allocated_bytes: int
    scrape_up: bool = False  # its agent answered this scrape with its readings


@dataclass(frozen=True, slots=True)
class GpuAllocation:
    """One GPU of a node and who holds it (job and tenant empty when free)."""

    node: str
    index: int
    uuid: str
    flavor: str
    fake: bool
    healthy: bool
    job: str = ""
    tenant: str = ""


@dataclass(frozen=True, slots=True)
class TaskUsage:
    """A task's CPU time and memory, read from its cgroup."""

    job: str
    tenant: str
    task: str
    node: str
    cpu_seconds: float
    memory_bytes: int


@dataclass(frozen=True, slots=True)
class GpuReading:
    """An NVML sample of a real GPU, with the node it belongs to and the job holding it."""

    sample: GpuSample
    hostname: str
    job: str = ""
    tenant: str = ""


@dataclass(frozen=True, slots=True)
class ClusterSample:
    jobs: dict[tuple[str, JobState], int] = field(default_factory=dict)
    flavors: list[TenantFlavor] = field(default_factory=list)
    budgets: list[TenantBudget] = field(default_factory=list)
    queues: list[QueueSample] = field(default_factory=list)
    nodes: list[NodeSample] = field(default_factory=list)
    gpus: list[GpuAllocation] = field(default_factory=list)
    tasks: list[TaskUsage] = field(default_factory=list)
    readings: list[GpuReading] = field(default_factory=list)
    idle_jobs: dict[str, str] = field(default_factory=dict)  # job id → tenant
    preemptions: dict[str, int] = field(default_factory=dict)  # tenant → its jobs' preemptions
    # (job id, tenant) → times preempted, for the queued and running jobs preempted at least once
    job_preemptions: dict[tuple[str, str], int] = field(default_factory=dict)
