"""Immutable resource values: amounts of CPU, memory and GPUs, GPU devices and nodes."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from gpuyard.model.value import Value


@dataclass(frozen=True, slots=True, init=False)
class Resources(Value):
    """An amount of node resources. CPU in millicores so that sums stay exact."""

    cpu_milli: int
    memory_mb: int
    gpus: int

    def __init__(
        self,
        cpu_milli: int = 0,
        memory_mb: int = 0,
        gpus: int = 0,
    ) -> None:  # by hand: compiled, it is built natively (docs/sim.md, Fast replays)
        object.__setattr__(self, "cpu_milli", cpu_milli)
        object.__setattr__(self, "memory_mb", memory_mb)
        object.__setattr__(self, "gpus", gpus)

    @classmethod
    def of(cls, cpu: float = 0, memory_mb: int = 0, gpus: int = 0) -> Resources:
        return cls(round(cpu * 1000), memory_mb, gpus)

    def __add__(self, other: Resources) -> Resources:
        return Resources(
            self.cpu_milli + other.cpu_milli,
            self.memory_mb + other.memory_mb,
            self.gpus + other.gpus,
        )

    def __sub__(self, other: Resources) -> Resources:
        return Resources(
            self.cpu_milli - other.cpu_milli,
            self.memory_mb - other.memory_mb,
            self.gpus - other.gpus,
        )

    def __mul__(self, n: int) -> Resources:
        return Resources(self.cpu_milli * n, self.memory_mb * n, self.gpus * n)

    def fits_in(self, capacity: Resources) -> bool:
        return (
            self.cpu_milli <= capacity.cpu_milli
            and self.memory_mb <= capacity.memory_mb
            and self.gpus <= capacity.gpus
        )

    @property
    def cpu(self) -> float:
        return self.cpu_milli / 1000


def gpu_type_matches(requested: str | None, actual: str) -> bool:
    """`A100` matches `A100-80GB` and `a100-80gb`; no request matches any type."""
    if not requested:
        return True
    req, act = requested.strip().upper(), actual.strip().upper()
    return act == req or act.startswith(req + "-")


@dataclass(frozen=True, slots=True)
class GpuDevice(Value):
    """One GPU of a node. `fake` GPUs are declared, not detected, and are always shown so."""

    index: int
    uuid: str
    type: str
    memory_mb: int
    fake: bool = False
    healthy: bool = True
    minor: int | None = None  # /dev/nvidia<minor>; None for fake GPUs without a device node
    topology_group: int | None = None  # same group = same NVLink/PCIe island; None: unknown
    health_cause: str | None = None  # why NVML says it is unhealthy: `XID 79`, `ECC ...`

    @property
    def label(self) -> str:
        return f"{self.type}{' (fake)' if self.fake else ''}"


@dataclass(frozen=True, slots=True)
class Node(Value):
    """A machine that runs tasks: its allocatable CPU, memory and GPUs.

    `address`: the node's IP, which the engine fills (host-network tasks are reached at it; the
    other nodes route to its `task_subnet` through it: the subnet its tasks' own addresses come
    from, None where the engine does not say). `schedulable=False`: no new work goes there
    (cordoned or draining, set by the controller from the store).
    """

    name: str
    cpu_milli: int
    memory_mb: int
    gpus: tuple[GpuDevice, ...] = ()
    labels: tuple[tuple[str, str], ...] = field(default=())
    schedulable: bool = True
    address: str = "127.0.0.1"
    task_subnet: str | None = None

    @property
    def capacity(self) -> Resources:
        return Resources(self.cpu_milli, self.memory_mb, len(self.gpus))

    def gpu(self, index: int) -> GpuDevice:
        for g in self.gpus:
            if g.index == index:
                return g
        raise KeyError(f"node {self.name} has no GPU {index}")


class CordonState(enum.StrEnum):
    """What an admin did to a node: cordoned (no new work) or draining (no new work, and its
    running jobs are preempted once the drain's deadline passes)."""

    CORDONED = "cordoned"
    DRAINING = "draining"


@dataclass(frozen=True, slots=True)
class NodeCordon(Value):
    """A node taken out of scheduling by an admin: how, why, by whom, since when, until when."""

    state: CordonState
    at: float
    by: str | None = None
    reason: str | None = None
    deadline: float | None = None  # draining only: running jobs are preempted after it
