"""Plain, immutable views of stored rows, handed out of the store (never live ORM objects)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gpuyard.model import JobState, TaskState
from gpuyard.store.tables import EventRow, JobRow, TaskRow

ACTIVE_TASK_STATES = (TaskState.STARTING.value, TaskState.RUNNING.value)


@dataclass(frozen=True, slots=True)
class Pending:
    """Why a queued job waits: a code, a sentence, its place in its tenant's queue (1-based
    `position` of `queue_length`) and its estimated start (epoch seconds), each when known,
    with what that estimate rests on (`eta_basis`: "the run times of 3 running jobs: ...")."""

    code: str
    message: str
    position: int | None = None
    queue_length: int | None = None
    eta: float | None = None
    eta_basis: str | None = None


# An estimated start that moved by less than this is not rewritten (it moves every cycle
# when it is "now + grace period").
ETA_SLACK_S = 5.0
# A place in the queue (or the queue's length) that moved by less than this share of it is
# not rewritten (below 40 places, every move is): with 10,000 queued, one submission (the
# length) or one start (every place) would otherwise rewrite every queued job's row.
PLACE_SLACK = 0.05


def pending_differs(stored: Pending | None, p: Pending, *, messages: bool = True) -> bool:
    """Whether `p` is worth writing over `stored`: its code, sentence (unless `messages` is
    false: the caller compared them) or estimate's basis differs, its place or the queue's
    length moved by `PLACE_SLACK` of it (any move below 40), or its estimate appeared, went,
    or moved by `ETA_SLACK_S` or more."""
    if stored is None:
        return True
    if (stored.code, stored.eta_basis) != (p.code, p.eta_basis):
        return True
    if messages and stored.message != p.message:
        return True
    if _moved(stored.position, p.position) or _moved(stored.queue_length, p.queue_length):
        return True
    if (stored.eta is None) != (p.eta is None):
        return True
    return stored.eta is not None and abs(stored.eta - (p.eta or 0.0)) >= ETA_SLACK_S


def _moved(was: int | None, now: int | None) -> bool:
    if was is None or now is None:
        return was != now
    return abs(was - now) >= max(1, int(max(was, now) * PLACE_SLACK))


@dataclass(frozen=True, slots=True)
class JobRecord:
    id: str
    seq: int
    name: str
    tenant: str
    owner: str | None
    state: JobState
    priority: int
    attempt: int
    retry_count: int
    retries_used: int
    spec: dict[str, Any]
    submitted_at: float
    started_at: float | None
    finished_at: float | None
    reason: str | None
    message: str | None
    pending_code: str | None
    pending_reason: str | None
    stop_requested: str | None
    queued_at: float | None = None
    borrowed: tuple[tuple[str, int], ...] = ()
    pending_position: int | None = None
    pending_queue_length: int | None = None
    pending_eta: float | None = None
    platform_failures: int = 0  # platform failures in a row (the backoff's count)
    not_before: float | None = None  # a backed-off job is not placed before this time
    preemptions: int = 0  # how many times it was preempted (requeued as Preempted)
    pending_eta_basis: str | None = None  # what its estimated start rests on
    original: dict[str, Any] | None = None  # the document as submitted (OpenPAI), if not ours
    held_by: str | None = None  # who holds it (a held queued job is not scheduled)
    array_id: str | None = None  # a job array's child: its parent (store/arrays.py)
    array_index: int | None = None
    session_seen_at: float | None = None  # a session last seen open on it (interactive jobs)
    rev: int = 0  # the revision that last changed it (store/revisions.py)

    @property
    def pending(self) -> Pending | None:
        """Why it waits, as stored by the last scheduler cycle (None when not waiting)."""
        if self.pending_code is None:
            return None
        return Pending(
            self.pending_code,
            self.pending_reason or "",
            self.pending_position,
            self.pending_queue_length,
            self.pending_eta,
            self.pending_eta_basis,
        )

    @property
    def opportunistic(self) -> bool:
        """Admitted beyond its tenant's guarantee: it may be preempted when the lender reclaims."""
        return any(amount > 0 for _, amount in self.borrowed)

    @classmethod
    def of(cls, r: JobRow) -> JobRecord:
        return cls(
            r.id,
            r.seq,
            r.name,
            r.tenant,
            r.owner,
            JobState(r.state),
            r.priority,
            r.attempt,
            r.retry_count,
            r.retries_used,
            json.loads(r.spec),
            r.submitted_at,
            r.started_at,
            r.finished_at,
            r.reason,
            r.message,
            r.pending_code,
            r.pending_reason,
            r.stop_requested,
            r.queued_at,
            tuple((str(f), int(n)) for f, n in json.loads(r.borrowed or "[]")),
            r.pending_position,
            r.pending_queue_length,
            r.pending_eta,
            r.platform_failures or 0,
            r.not_before,
            r.preemptions or 0,
            r.pending_eta_basis,
            json.loads(r.original_spec) if r.original_spec else None,
            r.held_by,
            r.array_id,
            r.array_index,
            r.session_seen_at,
            r.rev or 0,
        )


@dataclass(frozen=True, slots=True)
class TaskRecord:
    id: int
    job_id: str
    attempt: int
    role: str
    index: int
    key: str
    state: TaskState
    node: str
    gpus: tuple[int, ...]
    cpu_milli: int
    memory_mb: int
    exit_code: int | None
    reason: str | None
    message: str | None
    started_at: float | None
    finished_at: float | None
    stop_sent: bool
    gpu_memory_mb: int = 0  # > 0: a shared-GPU task holding this much of gpus[0]

    @property
    def name(self) -> str:
        return f"{self.role}/{self.index}"

    @classmethod
    def of(cls, r: TaskRow) -> TaskRecord:
        return cls(
            r.id,
            r.job_id,
            r.attempt,
            r.role,
            r.idx,
            r.key,
            TaskState(r.state),
            r.node,
            tuple(json.loads(r.gpus)),
            r.cpu_milli,
            r.memory_mb,
            r.exit_code,
            r.reason,
            r.message,
            r.started_at,
            r.finished_at,
            r.stop_sent,
            r.gpu_memory_mb or 0,
        )


@dataclass(frozen=True, slots=True)
class EventRecord:
    job_id: str
    time: float
    attempt: int
    task: str | None
    from_state: str | None
    to_state: str
    reason: str | None
    message: str | None

    @classmethod
    def of(cls, r: EventRow) -> EventRecord:
        return cls(
            r.job_id, r.time, r.attempt, r.task, r.from_state, r.to_state, r.reason, r.message
        )
