"""Job response bodies (camelCase JSON), built from store records.

A failed task's message ends with the last lines of its log (after `LOG_LINES`), and so do the
job's message and the events that carry it: each body takes `logs`, whether the caller may
read the job's logs (`JobAction.LOGS`); without it the log lines are cut off and `LOG_HIDDEN`
says so. The default is without: a body built without asking shows no log lines.
"""

from __future__ import annotations

from typing import Any

from gpuyard.api.schemas.arrays import ArraySummary
from gpuyard.api.schemas.common import Out, iso
from gpuyard.api.schemas.images import ImagePresence
from gpuyard.model import GpuDevice, Node
from gpuyard.runtime.exits import LOG_LINES
from gpuyard.store import EventRecord, JobRecord, TaskRecord

#: The quota book's keys that are not GPU flavors (`gpuyard.scheduler.quota`: CPU, MEMORY).
NOT_GPUS = frozenset({"cpu", "memory"})
#: what stands for a message's log lines to a caller who may not read the job's logs
LOG_HIDDEN = "(log lines hidden: you may not read this job's logs)"


class Submitted(Out):
    id: str
    name: str
    state: str
    children: list[str] | None = None  # a job array's: its children's ids, by index


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
    gpu_memory_mb: int = 0  # > 0: a shared-GPU task holding this much of its one GPU
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


class Borrowed(Out):
    """GPUs of one flavor a job holds beyond its tenant's guarantee."""

    flavor: str
    gpus: int


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
    pending_position: int | None = None
    pending_queue_length: int | None = None
    estimated_start: str | None = None
    estimated_start_basis: str | None = None  # what the estimate rests on
    preemptions: int = 0  # how many times the job was preempted (requeued, not a retry)
    opportunistic: bool = False
    borrowed: list[Borrowed] = []
    held_by: str | None = None  # who holds the queued job (`gpuyard hold`), or null
    array_id: str | None = None  # a job array's child: its parent (`GET /api/v1/arrays/{id}`)
    array_index: int | None = None
    after: dict[str, list[str]] | None = None  # the jobs it waits for: ok, any, notok


class JobDetail(JobSummary):
    spec: dict[str, Any]
    tasks: list[TaskOut]
    events: list[EventOut]
    images: list[ImagePresence] = []  # where each of its images is present, by node


class JobList(Out):
    jobs: list[JobSummary]
    # the job arrays whose children are on this page, for a tree (api/schemas/arrays.py)
    arrays: list[ArraySummary] = []
    next_cursor: str | None = None  # pass as `cursor` (same filters) for the next page


class EventList(Out):
    events: list[EventOut]


class Cancelled(Out):
    id: str
    state: str
    stop_requested: str | None


def spec_gpus(spec: dict[str, Any]) -> int:
    """The whole GPUs a job asks for: every task of every role."""
    roles = spec.get("taskRoles", {})
    return sum(int(r.get("gpuNumber", 0)) * int(r.get("taskNumber", 1)) for r in roles.values())


def borrowed_gpus(j: JobRecord) -> list[Borrowed]:
    """What the job borrows, GPU flavors only (CPU, memory and GPU-memory borrowing, keyed
    `<flavor>/MB`, only show in `opportunistic`)."""
    return [
        Borrowed(flavor=f, gpus=n)
        for f, n in j.borrowed
        if n > 0 and f not in NOT_GPUS and "/" not in f
    ]


def shown_message(message: str | None, logs: bool) -> str | None:
    """`message` as the caller may see it: whole with `logs`, else cut before its log lines."""
    if message is None or logs or LOG_LINES not in message:
        return message
    return message[: message.index(LOG_LINES)] + LOG_HIDDEN


def job_summary(j: JobRecord, logs: bool = False) -> dict[str, Any]:
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
        "gpus": spec_gpus(j.spec),
        "submitted_at": iso(j.submitted_at),
        "started_at": iso(j.started_at),
        "finished_at": iso(j.finished_at),
        "reason": j.reason,
        "message": shown_message(j.message, logs),
        "pending_code": j.pending_code,
        "pending_reason": j.pending_reason,
        "pending_position": j.pending_position,
        "pending_queue_length": j.pending_queue_length,
        "estimated_start": iso(j.pending_eta),
        "estimated_start_basis": j.pending_eta_basis,
        "preemptions": j.preemptions,
        "opportunistic": j.opportunistic,
        "borrowed": borrowed_gpus(j),
        "held_by": j.held_by,
        "array_id": j.array_id,
        "array_index": j.array_index,
        "after": j.spec.get("after"),
    }


def task_out(t: TaskRecord, node: Node | None, logs: bool = False) -> TaskOut:
    devices = {g.index: g for g in node.gpus} if node else {}
    gpus = [_gpu_ref(i, devices.get(i)) for i in t.gpus]
    return TaskOut(
        role=t.role,
        index=t.index,
        attempt=t.attempt,
        state=str(t.state),
        node=t.node,
        gpus=gpus,
        gpu_memory_mb=t.gpu_memory_mb,
        exit_code=t.exit_code,
        reason=t.reason,
        message=shown_message(t.message, logs),
        started_at=iso(t.started_at),
        finished_at=iso(t.finished_at),
    )


def _gpu_ref(index: int, g: GpuDevice | None) -> GpuRef:
    if g is None:
        return GpuRef(index=index, uuid="unknown", type="unknown", fake=False)
    return GpuRef(index=index, uuid=g.uuid, type=g.type, fake=g.fake)


def event_out(e: EventRecord, logs: bool = False) -> EventOut:
    return EventOut(
        time=iso(e.time),
        from_state=e.from_state,
        to_state=e.to_state,
        reason=e.reason,
        message=shown_message(e.message, logs),
        task=e.task,
        attempt=e.attempt,
    )
