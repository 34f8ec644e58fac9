"""Node request and response bodies."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, StrictInt, StrictStr, field_validator

from gpuyard.api.schemas.common import Out, camel
from gpuyard.spec.errors import got


class GpuUser(Out):
    """A task on a GPU (`job`/`tenant` null when the caller may not see that job)."""

    job: str | None
    tenant: str | None
    task: str | None  # role/index


class GpuOut(Out):
    index: int
    uuid: str
    type: str
    memory_mb: int
    fake: bool
    healthy: bool
    health_cause: str | None = None  # why NVML says it is unhealthy (XID 79, ECC, lost)
    state: str  # free | used | unhealthy | cordoned (free, on a cordoned or draining node)
    busy: bool  # held by a task (`job` is null when the caller may not see that job)
    job: str | None
    tenant: str | None = None
    users: list[GpuUser] = []  # every task on it (several on a shared GPU)
    utilization_pct: float | None = None  # from NVML; None for fake GPUs or without readings


class Allocated(Out):
    cpu: float
    memory_mb: int
    gpus: int


class CordonOut(Out):
    state: str  # cordoned | draining
    reason: str | None
    by: str | None
    at: str | None  # ISO time
    deadline: str | None  # draining: when its running jobs are preempted (null: never)


class NodeOut(Out):
    name: str
    address: str
    state: str  # ready | cordoned | draining
    cpu: float
    memory_mb: int
    schedulable: bool  # new work may land here (the engine says so and it is not cordoned)
    cordon: CordonOut | None = None
    allocated: Allocated
    gpus: list[GpuOut]


class NodeList(Out):
    nodes: list[NodeOut]


class CordonIn(BaseModel):
    """Body of cordon / drain (both optional): why, and for a drain, by when (`2h`, `30m`,
    seconds; absent: running jobs may finish however long they take)."""

    model_config = ConfigDict(alias_generator=camel, populate_by_name=True, extra="forbid")

    reason: StrictStr | None = None
    deadline: StrictStr | StrictInt | None = None

    @field_validator("deadline", mode="before")
    @classmethod
    def _duration_words(cls, value: object) -> object:
        """`"deadline": false` is no duration (lax mode read it as 0 s: preempt all now)."""
        if value is None or (isinstance(value, str | int) and not isinstance(value, bool)):
            return value
        raise ValueError(f"must be a duration like 30m, 2h or 90s, or whole seconds{got(value)}")
