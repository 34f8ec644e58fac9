"""Job response bodies (camelCase JSON), built from store records."""

from __future__ import annotations

from typing import Any

from gpuyard.api.schemas.common import FieldErrorOut, Out, iso
from gpuyard.model import GpuDevice, Node
from gpuyard.store import EventRecord, JobRecord, TaskRecord


class SpecErrorOut(Out):
    detail: str
    errors: list[FieldErrorOut]


class Submitted(Out):
    id: str
    name: str
    state: str


class GpuRef(Out):
    index: int
    uuid: str
    type: str
    fake: bool


class TaskOut(Out):
    role: str
    index: int
    attempt: int
    state: str
    node: str
    gpus: list[GpuRef]
    exit_code: int | None
    reason: str | None
    message: str | None
    started_at: str | None
    finished_at: str | None


class EventOut(Out):
    time: str | None
    from_state: str | None
    to_state: str
    reason: str | None
    message: str | None
    task: str | None
    attempt: int


class JobSummary(Out):
    id: str
    name: str
    tenant: str
    owner: str | None
    state: str
    priority: int
    attempt: int
    retry_count: int
    retries_used: int
    gpus: int
    submitted_at: str | None
    started_at: str | None
    finished_at: str | None
    reason: str | None
    message: str | None
    pending_code: str | None
    pending_reason: str | None


class JobDetail(JobSummary):
    spec: dict[str, Any]
    tasks: list[TaskOut]
    events: list[EventOut]


class JobList(Out):
    jobs: list[JobSummary]


class EventList(Out):
    events: list[EventOut]


class Cancelled(Out):
    id: str
    state: str
    stop_requested: str | None


def job_summary(j: JobRecord) -> dict[str, Any]:
    roles = j.spec.get("taskRoles", {})
    gpus = sum(int(r.get("gpuNumber", 0)) * int(r.get("taskNumber", 1)) for r in roles.values())
    return {
        "id": j.id,
        "name": j.name,
        "tenant": j.tenant,
        "owner": j.owner,
        "state": str(j.state),
        "priority": j.priority,
        "attempt": j.attempt,
        "retry_count": j.retry_count,
        "retries_used": j.retries_used,
        "gpus": gpus,
        "submitted_at": iso(j.submitted_at),
        "started_at": iso(j.started_at),
        "finished_at": iso(j.finished_at),
        "reason": j.reason,
        "message": j.message,
        "pending_code": j.pending_code,
        "pending_reason": j.pending_reason,
    }


def task_out(t: TaskRecord, node: Node | None) -> TaskOut:
    devices = {g.index: g for g in node.gpus} if node else {}
    gpus = [_gpu_ref(i, devices.get(i)) for i in t.gpus]
    return TaskOut(
        role=t.role,
        index=t.index,
        attempt=t.attempt,
        state=str(t.state),
        node=t.node,
        gpus=gpus,
        exit_code=t.exit_code,
        reason=t.reason,
        message=t.message,
        started_at=iso(t.started_at),
        finished_at=iso(t.finished_at),
    )


def _gpu_ref(index: int, g: GpuDevice | None) -> GpuRef:
    if g is None:
        return GpuRef(index=index, uuid="unknown", type="unknown", fake=False)
    return GpuRef(index=index, uuid=g.uuid, type=g.type, fake=g.fake)


def event_out(e: EventRecord) -> EventOut:
    return EventOut(
        time=iso(e.time),
        from_state=e.from_state,
        to_state=e.to_state,
        reason=e.reason,
        message=e.message,
        task=e.task,
        attempt=e.attempt,
    )
