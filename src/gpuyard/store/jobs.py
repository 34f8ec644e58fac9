"""Jobs, their tasks and their events: every read and write the API and controller need.

`JobRepo.move` is the one function that changes a job's state: it checks the move against
the transition table of `gpuyard.model.states` and records the event in the same transaction.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Row, func, select, update
from sqlalchemy.orm import Session, sessionmaker

from gpuyard.model import Clock, JobState, TaskReason, TaskState, check_job_transition
from gpuyard.store.jobfilter import JobFilter, filtered
from gpuyard.store.records import (
    ACTIVE_TASK_STATES,
    EventRecord,
    JobRecord,
    Pending,
    TaskRecord,
    pending_differs,
)
from gpuyard.store.revisions import JOBS_COUNTER
from gpuyard.store.secrets import SecretBox
from gpuyard.store.tables import EventRow, JobRow, RevisionRow, TaskRow

JOBS = JobRow.__table__
# what `set_pending` compares before it locks a row to write it
PENDING_COLUMNS = tuple(
    JOBS.c[name]
    for name in (
        "id", "state", "pending_code", "pending_reason", "pending_position",
        "pending_queue_length", "pending_eta", "pending_eta_basis",
    )
)


class JobNotFound(LookupError):
    pass


class JobAlreadyEnded(RuntimeError):
    pass


class JobNotQueued(RuntimeError):
    """Only a queued job can be held (HTTP 409); the text says what state it is in."""


@dataclass(frozen=True, slots=True)
class NewJob:
    name: str
    tenant: str
    priority: int
    retry_count: int
    spec: Mapping[str, Any]
    owner: str | None = None
    original: Mapping[str, Any] | None = None  # the document as submitted, if not ours
    warnings: tuple[str, ...] = ()  # fields accepted but not honoured: SpecWarning events


@dataclass(frozen=True, slots=True)
class NewTask:
    role: str
    index: int
    node: str
    gpus: tuple[int, ...]
    cpu_milli: int
    memory_mb: int
    gpu_memory_mb: int = 0  # > 0: a shared-GPU task holding this much of gpus[0]


# The reason of the events that record a spec's warnings (gpuyard.spec.notices.EVENT_REASON).
SPEC_WARNING = "SpecWarning"

# The PostgreSQL advisory lock key that serializes submissions (`_next_seq`): "gpyd" + 1.
SUBMIT_LOCK = 0x67707964_00000001

# A cancel overrides a timeout, which overrides a preemption: what the user asked for wins.
# An interactive job's session ending (`SessionEnded(exit 3)`: by its kind) ranks with a
# timeout: the first of them stays (a job stopped for its timeout kills its session's command).
_STOP_PRECEDENCE = {
    "Preempted": 1,
    "IdleGPU": 2,
    "Timeout": 2,
    TaskReason.SESSION_ENDED: 2,
    TaskReason.SESSION_LOST: 2,
    TaskReason.SESSION_IDLE: 2,
    "Cancelled": 3,
}


def task_key(job_id: str, attempt: int, role: str, index: int) -> str:
    return f"{job_id}-a{attempt}-{role}-{index}"


class JobRepo:
    def __init__(
        self, sessions: sessionmaker[Session], clock: Clock, secrets: SecretBox | None = None
    ) -> None:
        self._sessions = sessions
        self._clock = clock
        self._secrets = secrets or SecretBox.at(None)  # specs' secret values, sealed at rest
        # `in_states`' last answer per set of states: each row with its record, to reuse
        self._last: dict[tuple[str, ...], dict[str, tuple[Row[Any], JobRecord]]] = {}

    def _record(self, row: JobRow | Row[Any]) -> JobRecord:
        """The row's record, its spec's secret values opened (they are sealed at rest)."""
        record = JobRecord.of(row)
        if self._secrets.holds_sealed(row.spec):
            record = dataclasses.replace(record, spec=self._secrets.unseal(record.spec))
        if row.original_spec and self._secrets.holds_sealed(row.original_spec):
            record = dataclasses.replace(record, original=self._secrets.unseal(record.original))
        return record

    # ---- reads -------------------------------------------------------------------------

    def get(self, job_id: str) -> JobRecord | None:
        with self._sessions() as s:
            row = s.get(JobRow, job_id)
            return self._record(row) if row else None

    def list(
        self,
        states: Iterable[str] = (),
        tenant: str | None = None,
        limit: int = 100,
        tenants: Collection[str] | None = None,
        *,
        owners: Collection[str] | None = None,
        name: str | None = None,
        offset: int = 0,
    ) -> list[JobRecord]:
        """Newest first; `tenant` one tenant, `tenants` any of these, `owners` any of these
        (None: no filter); `name` one job name; `offset` jobs skipped (OpenPAI's paging)."""
        q = select(JobRow).order_by(JobRow.seq.desc()).limit(max(1, min(limit, 1000)))
        if states := list(states):
            q = q.where(JobRow.state.in_(states))
        if tenant:
            q = q.where(JobRow.tenant == tenant)
        if tenants is not None:
            q = q.where(JobRow.tenant.in_(list(tenants)))
        if owners is not None:
            q = q.where(JobRow.owner.in_(list(owners)))
        if name is not None:
            q = q.where(JobRow.name == name)
        if offset > 0:
            q = q.offset(offset)
        with self._sessions() as s:
            return [self._record(r) for r in s.scalars(q)]

    def find(self, f: JobFilter, limit: int = 100) -> list[JobRecord]:
        """The jobs `f` matches, newest first, at most `limit` (1 to 1001)."""
        q = filtered(select(JobRow), f).order_by(JobRow.seq.desc()).limit(max(1, min(limit, 1001)))
        with self._sessions() as s:
            return [self._record(r) for r in s.scalars(q)]

    def in_states(self, *states: JobState) -> list[JobRecord]:
        """The jobs in these states, oldest first. Read each time (Core rows, not ORM
        objects); a row equal to the one the last call with the same states read keeps its
        record, so a queue that did not change costs one query and no JSON parsing."""
        key = tuple(sorted(str(x) for x in states))
        q = select(JOBS).where(JOBS.c.state.in_(key)).order_by(JOBS.c.seq)
        with self._sessions() as s:
            rows = s.execute(q).all()
        last, now = self._last.get(key, {}), {}
        for row in rows:
            kept = last.get(row.id)
            now[row.id] = kept if kept is not None and kept[0] == row else (row, self._record(row))
        self._last[key] = now  # one assignment: a reader on another thread sees old or new
        return [record for _, record in now.values()]

    def revision(self) -> int:
        """The jobs' revision now: every row changed up to it is committed and readable."""
        with self._sessions() as s:
            q = select(RevisionRow.n).where(RevisionRow.name == JOBS_COUNTER)
            return int(s.scalar(q) or 0)

    def changed_since(self, rev: int, states: Iterable[JobState] = ()) -> list[JobRecord]:
        """The jobs changed (as the controller acts on them) after revision `rev`, in the
        order of their revisions, of these states only if any are named; each record's `rev`
        says which revision (store/revisions.py)."""
        q = select(JOBS).where(JOBS.c.rev > rev).order_by(JOBS.c.rev, JOBS.c.seq)
        if states := [str(x) for x in states]:
            q = q.where(JOBS.c.state.in_(states))
        with self._sessions() as s:
            return [self._record(row) for row in s.execute(q)]

    def stop_requested(self) -> list[JobRecord]:
        q = (
            select(JobRow)
            .where(JobRow.stop_requested.is_not(None))
            .where(JobRow.state.in_([JobState.QUEUED, JobState.SCHEDULED, JobState.RUNNING]))
        )
        with self._sessions() as s:
            return [self._record(r) for r in s.scalars(q)]

    def tasks(self, job_id: str, attempt: int | None = None) -> list[TaskRecord]:
        q = select(TaskRow).where(TaskRow.job_id == job_id)
        if attempt is not None:
            q = q.where(TaskRow.attempt == attempt)
        q = q.order_by(TaskRow.attempt.desc(), TaskRow.id)
        with self._sessions() as s:
            return [TaskRecord.of(r) for r in s.scalars(q)]

    def attempts_tasks(self, jobs: Iterable[JobRecord]) -> dict[str, list[TaskRecord]]:
        """Job id → the tasks of its current attempt, in id order, for these jobs (one
        query per 500 jobs, where `tasks` is one per job)."""
        attempt = {j.id: j.attempt for j in jobs}
        out: dict[str, list[TaskRecord]] = {job_id: [] for job_id in attempt}
        ids = sorted(attempt)
        with self._sessions() as s:
            for at in range(0, len(ids), 500):
                q = select(TaskRow).where(TaskRow.job_id.in_(ids[at : at + 500]))
                for row in s.scalars(q.order_by(TaskRow.id)):
                    if row.attempt == attempt[row.job_id]:
                        out[row.job_id].append(TaskRecord.of(row))
        return out

    def active_tasks(self) -> list[TaskRecord]:
        q = select(TaskRow).where(TaskRow.state.in_(ACTIVE_TASK_STATES)).order_by(TaskRow.id)
        with self._sessions() as s:
            return [TaskRecord.of(r) for r in s.scalars(q)]

    def events(self, job_id: str) -> list[EventRecord]:
        q = select(EventRow).where(EventRow.job_id == job_id).order_by(EventRow.id)
        with self._sessions() as s:
            return [EventRecord.of(r) for r in s.scalars(q)]

    def counts(self) -> dict[tuple[str, JobState], int]:
        """How many jobs each tenant has in each state (one grouped query)."""
        q = select(JobRow.tenant, JobRow.state, func.count()).group_by(JobRow.tenant, JobRow.state)
        with self._sessions() as s:
            return {(tenant, JobState(st)): n for tenant, st, n in s.execute(q)}

    def preemptions_by_tenant(self) -> dict[str, int]:
        """How many times each tenant's jobs were preempted, all jobs ever (one grouped query)."""
        q = select(JobRow.tenant, func.sum(JobRow.preemptions)).group_by(JobRow.tenant)
        with self._sessions() as s:
            return {tenant: int(n or 0) for tenant, n in s.execute(q)}

    def queues(self) -> dict[str, tuple[int, float]]:
        """Each tenant's queue: how many jobs, and when the oldest was queued (one grouped
        query: the metrics read this, never the queue's rows)."""
        since = func.min(func.coalesce(JobRow.queued_at, JobRow.submitted_at))
        q = (
            select(JobRow.tenant, func.count(), since)
            .where(JobRow.state == JobState.QUEUED)
            .group_by(JobRow.tenant)
        )
        with self._sessions() as s:
            return {tenant: (int(n), float(at)) for tenant, n, at in s.execute(q)}

    def preempted(self, *states: JobState) -> dict[tuple[str, str], int]:
        """(job id, tenant) → times preempted, of the jobs in these states preempted at all."""
        q = select(JobRow.id, JobRow.tenant, JobRow.preemptions).where(
            JobRow.state.in_([str(x) for x in states]), JobRow.preemptions > 0
        )
        with self._sessions() as s:
            return {(job_id, tenant): int(n) for job_id, tenant, n in s.execute(q)}

    # ---- writes ------------------------------------------------------------------------

    def note(self, job_id: str, reason: str, message: str | None = None) -> bool:
        """An event that changes nothing (from = to = the job's state), e.g. `IdleGPU`."""
        now = self._clock.now()
        with self._sessions.begin() as s:
            row = _locked(s, job_id)
            if row is None or JobState(row.state).is_final:
                return False
            st = JobState(row.state)
            s.add(_event(row, st, st, reason, message, now))
            return True

    def record_event(self, job_id: str, reason: str, message: str) -> None:
        """An event that changes nothing, in any state, ended included (e.g. `Resubmitted`)."""
        now = self._clock.now()
        with self._sessions.begin() as s:
            row = _row(s, job_id)
            st = JobState(row.state)
            s.add(_event(row, st, st, reason, message, now))

    def hold(self, job_id: str, by: str, pending: Pending) -> JobRecord:
        """Hold a queued job: it keeps its place but is not scheduled until `release`; an
        event says who held it. Holding a held job changes nothing."""
        now = self._clock.now()
        with self._sessions.begin() as s:
            row = _queued_row(s, job_id, "held")
            if row.held_by is None:
                row.held_by = by
                _write_pending(row, pending)
                s.add(_event(row, JobState.QUEUED, JobState.QUEUED, "Held", f"held by {by}", now))
            return self._record(row)

    def release(self, job_id: str, by: str) -> JobRecord:
        """Let a held job be scheduled again (its pending reason comes back next cycle)."""
        now = self._clock.now()
        with self._sessions.begin() as s:
            row = _queued_row(s, job_id, "released")
            if row.held_by is not None:
                held = row.held_by
                row.held_by = None
                _write_pending(row, None)
                message = f"released by {by} (held by {held})"
                s.add(_event(row, JobState.QUEUED, JobState.QUEUED, "Released", message, now))
            return self._record(row)

    def set_priority(self, job_id: str, priority: int, by: str) -> JobRecord:
        """A job's new priority (its spec's too), with an event; an ended job cannot change."""
        now = self._clock.now()
        with self._sessions.begin() as s:
            row = _row(s, job_id)
            st = JobState(row.state)
            if st.is_final:
                raise JobAlreadyEnded(f"job {job_id} already ended {row.state}")
            before = row.priority
            if before != priority:
                spec = self._record(row).spec | {"priority": priority}
                row.priority, row.spec = priority, json.dumps(self._secrets.seal(spec))
                message = f"priority {before} → {priority} by {by}"
                s.add(_event(row, st, st, "PriorityChanged", message, now))
            return self._record(row)

    def submit(self, job: NewJob) -> JobRecord:
        now = self._clock.now()
        with self._sessions.begin() as s:
            seq = _next_seq(s)
            row = JobRow(
                id=uuid.uuid4().hex[:12],
                seq=seq,
                name=job.name,
                tenant=job.tenant,
                owner=job.owner,
                state=JobState.QUEUED,
                priority=job.priority,
                attempt=1,
                retry_count=job.retry_count,
                retries_used=0,
                spec=json.dumps(self._secrets.seal(job.spec)),
                original_spec=self._sealed_json(job.original),
                submitted_at=now,
                queued_at=now,
            )
            s.add(row)
            s.flush()  # the job row first: events reference it
            s.add(_event(row, None, JobState.QUEUED, "Submitted", None, now))
            for warning in job.warnings:
                s.add(_event(row, JobState.QUEUED, JobState.QUEUED, SPEC_WARNING, warning, now))
            return self._record(row)

    def _sealed_json(self, doc: Mapping[str, Any] | None) -> str | None:
        return json.dumps(self._secrets.seal(doc)) if doc is not None else None

    def request_stop(self, job_id: str, reason: str) -> JobRecord:
        """Ask the controller to stop a job (`Cancelled`, `Timeout`, `Preempted`).

        The controller does the stopping. A stronger reason replaces a weaker one.
        """
        with self._sessions.begin() as s:
            row = _locked(s, job_id)
            if row is None:
                raise JobNotFound(job_id)
            if JobState(row.state).is_final:
                raise JobAlreadyEnded(f"job {job_id} already ended {row.state}")
            if _stop_rank(reason) > _stop_rank(row.stop_requested):
                row.stop_requested = reason
            return self._record(row)

    def session_seen(self, job_id: str) -> None:
        """A session is open on the job now (its heartbeat: api/services/interactive.py)."""
        now = self._clock.now()
        with self._sessions.begin() as s:
            s.execute(update(JobRow).where(JobRow.id == job_id).values(session_seen_at=now))

    def move(
        self,
        job_id: str,
        to: JobState,
        reason: str | None,
        message: str | None = None,
        **fields: Any,
    ) -> JobRecord:
        """The one way a job changes state: checked against the table, recorded as an event."""
        now = self._clock.now()
        with self._sessions.begin() as s:
            row = _locked(s, job_id)
            if row is None:
                raise JobNotFound(job_id)
            _move(s, row, to, reason, message, now)
            for name, value in fields.items():
                setattr(row, name, value)
            if to == JobState.QUEUED:  # a new attempt waits from now, and borrows nothing yet
                row.queued_at, row.borrowed = now, "[]"
                row.preemptions = (row.preemptions or 0) + (reason == TaskReason.PREEMPTED)
            if to.is_final:  # an ended job keeps why it ended
                row.finished_at, row.reason, row.message = now, reason, message
                _write_pending(row, None)
            return self._record(row)

    def bind(
        self,
        job_id: str,
        attempt: int,
        tasks: Sequence[NewTask],
        borrowed: Sequence[tuple[str, int]] = (),
    ) -> list[TaskRecord]:
        """QUEUED → SCHEDULED with one STARTING task row per placed task, in one transaction.

        `borrowed`: what the job takes beyond its tenant's guarantee (opportunistic if any).
        """
        now = self._clock.now()
        with self._sessions.begin() as s:
            row = _locked(s, job_id)
            if row is None or row.state != JobState.QUEUED or row.attempt != attempt:
                return []
            if row.held_by is not None:  # held since the cycle read the queue
                return []
            how = "Scheduled (opportunistic)" if any(n > 0 for _, n in borrowed) else "Scheduled"
            _move(s, row, JobState.SCHEDULED, how, _where(tasks), now)
            _write_pending(row, None)
            row.borrowed = json.dumps([[f, n] for f, n in borrowed])
            rows = _task_rows(job_id, attempt, tasks)
            s.add_all(rows)
            s.flush()
            return [TaskRecord.of(r) for r in rows]

    def bind_more(
        self,
        job_id: str,
        attempt: int,
        tasks: Sequence[NewTask],
        borrowed: Sequence[tuple[str, int]] = (),
    ) -> list[TaskRecord]:
        """Add placed tasks to a bound job without gang allocation (its remainder, admitted):
        one STARTING task row each and an event, in one transaction; nothing (an empty list)
        unless the job is still SCHEDULED or RUNNING in `attempt`, no stop was asked or sent
        (the attempt is not decided) and none of the tasks has a row yet. `borrowed` is added
        to the job's."""
        now = self._clock.now()
        with self._sessions.begin() as s:
            row = _locked(s, job_id)
            if row is None or row.attempt != attempt or row.stop_requested is not None:
                return []
            if row.state not in (JobState.SCHEDULED, JobState.RUNNING):
                return []
            have = s.execute(
                select(TaskRow.role, TaskRow.idx, TaskRow.stop_sent).where(
                    TaskRow.job_id == job_id, TaskRow.attempt == attempt
                )
            ).all()
            placed = {(r, i) for r, i, _ in have}
            if any(sent for _, _, sent in have) or any((t.role, t.index) in placed for t in tasks):
                return []
            took = dict((str(f), int(n)) for f, n in json.loads(row.borrowed or "[]"))
            for f, n in borrowed:
                took[f] = took.get(f, 0) + n
            row.borrowed = json.dumps([[f, n] for f, n in took.items()])
            state = JobState(row.state)
            s.add(_event(row, state, state, "TasksScheduled", _where(tasks), now))
            rows = _task_rows(job_id, attempt, tasks)
            s.add_all(rows)
            s.flush()
            return [TaskRecord.of(r) for r in rows]

    def task_running(self, task_id: int, started_at: float, message: str | None = None) -> bool:
        """The task runs; `message` goes on its start event (e.g. "image present")."""
        with self._sessions.begin() as s:
            row = s.get(TaskRow, task_id, with_for_update=True)
            if row is None or row.state != TaskState.STARTING:
                return False
            row.state, row.started_at = TaskState.RUNNING, started_at
            row.reason = row.message = None  # a start's detail (`task_detail`) is over
            s.add(
                _task_event(row, TaskState.STARTING, TaskState.RUNNING, None, message, started_at)
            )
            return True

    def task_detail(self, task_id: int, reason: str, message: str) -> bool:
        """What a STARTING task waits for (e.g. `PullingImage`, "pulling image X"): kept on the
        task and, when it changed, told as an event; False if nothing was written."""
        now = self._clock.now()
        with self._sessions.begin() as s:
            row = s.get(TaskRow, task_id, with_for_update=True)
            if row is None or row.state != TaskState.STARTING:
                return False
            if (row.reason, row.message) == (reason, message):
                return False
            row.reason, row.message = reason, message
            s.add(_task_event(row, TaskState.STARTING, TaskState.STARTING, reason, message, now))
            return True

    def task_ended(
        self,
        task_id: int,
        state: TaskState,
        exit_code: int | None,
        reason: str,
        message: str | None,
        finished_at: float,
    ) -> bool:
        """Record a task's end exactly once: False if it was already recorded."""
        with self._sessions.begin() as s:
            row = s.get(TaskRow, task_id, with_for_update=True)
            if row is None or row.state not in ACTIVE_TASK_STATES:
                return False
            s.add(_task_event(row, TaskState(row.state), state, reason, message, finished_at))
            row.state, row.exit_code, row.reason = state, exit_code, reason
            row.message, row.finished_at = message, finished_at
            return True

    def stop_sent(self, task_ids: Iterable[int]) -> None:
        with self._sessions.begin() as s:
            s.execute(update(TaskRow).where(TaskRow.id.in_(list(task_ids))).values(stop_sent=True))

    def set_pending(self, reasons: Mapping[str, Pending]) -> None:
        """Store each queued job's pending reason; write only the rows whose reason changed
        (`pending_differs`: an estimated start that moved by less than `ETA_SLACK_S` does
        not count). The controller passes only the reasons its mirror saw change."""
        if not reasons:
            return
        with self._sessions.begin() as s:
            for row in _lock_changed(s, reasons):
                if row.state == JobState.QUEUED:
                    _write_pending(row, reasons[row.id])


def _lock_changed(s: Session, reasons: Mapping[str, Pending]) -> Sequence[JobRow]:
    """The queued jobs whose pending reason changed, read again FOR UPDATE on PostgreSQL
    (only those: locking every queued row each cycle would write every one), in id order so
    that two writers never wait on each other."""
    rows = s.execute(select(*PENDING_COLUMNS).where(JOBS.c.id.in_(list(reasons))))
    changed = [
        r.id for r in rows if r.state == JobState.QUEUED and _pending_changed(r, reasons[r.id])
    ]
    if not changed:
        return []
    q = select(JobRow).where(JobRow.id.in_(changed)).order_by(JobRow.id).with_for_update()
    return s.scalars(q.execution_options(populate_existing=True)).all()


def _row(s: Session, job_id: str) -> JobRow:
    row = _locked(s, job_id)
    if row is None:
        raise JobNotFound(job_id)
    return row


def _locked(s: Session, job_id: str) -> JobRow | None:
    """The job's row, read to be written over: FOR UPDATE on PostgreSQL (a second writer
    waits, then reads what the first wrote); SQLite's write transactions hold the lock."""
    return s.get(JobRow, job_id, with_for_update=True)


def _next_seq(s: Session) -> int:
    """The next submission number; on PostgreSQL under a transaction-scoped advisory lock, so
    concurrent submits (from any server on the database) take turns."""
    if s.get_bind().dialect.name == "postgresql":
        s.execute(select(func.pg_advisory_xact_lock(SUBMIT_LOCK)))
    return (s.scalar(select(func.max(JobRow.seq))) or 0) + 1


def _queued_row(s: Session, job_id: str, what: str) -> JobRow:
    row = _row(s, job_id)
    if row.state != JobState.QUEUED:
        raise JobNotQueued(f"job {job_id} is {row.state}: only a queued job can be {what}")
    return row


def _pending_changed(row: JobRow | Row[Any], p: Pending) -> bool:
    stored = None
    if row.pending_code is not None:
        stored = Pending(
            row.pending_code,
            row.pending_reason or "",
            row.pending_position,
            row.pending_queue_length,
            row.pending_eta,
            row.pending_eta_basis,
        )
    return pending_differs(stored, p)


def _stop_rank(reason: str | None) -> int:
    """How strong a stop reason is (none: -1, an unknown one: 0)."""
    return -1 if reason is None else _STOP_PRECEDENCE.get(TaskReason.kind(reason), 0)


def _write_pending(row: JobRow, p: Pending | None) -> None:
    """Set (or, with None, clear) the job's pending code, sentence, position and estimate."""
    row.pending_code = p.code if p else None
    row.pending_reason = p.message if p else None
    row.pending_position = p.position if p else None
    row.pending_queue_length = p.queue_length if p else None
    row.pending_eta = p.eta if p else None
    row.pending_eta_basis = p.eta_basis if p else None


def _move(
    s: Session, row: JobRow, to: JobState, reason: str | None, message: str | None, now: float
) -> None:
    src = JobState(row.state)
    check_job_transition(src, to)
    row.state = to
    s.add(_event(row, src, to, reason, message, now))


def _event(
    row: JobRow,
    src: JobState | None,
    to: JobState,
    reason: str | None,
    message: str | None,
    now: float,
) -> EventRow:
    return EventRow(
        job_id=row.id,
        time=now,
        attempt=row.attempt,
        task=None,
        from_state=str(src) if src else None,
        to_state=str(to),
        reason=reason,
        message=message,
    )


def _task_event(
    row: TaskRow,
    src: TaskState,
    to: TaskState,
    reason: str | None,
    message: str | None,
    now: float,
) -> EventRow:
    return EventRow(
        job_id=row.job_id,
        time=now,
        attempt=row.attempt,
        task=f"{row.role}/{row.idx}",
        from_state=str(src),
        to_state=str(to),
        reason=reason,
        message=message,
    )


def _task_rows(job_id: str, attempt: int, tasks: Sequence[NewTask]) -> list[TaskRow]:
    return [
        TaskRow(
            job_id=job_id,
            attempt=attempt,
            role=t.role,
            idx=t.index,
            key=task_key(job_id, attempt, t.role, t.index),
            state=TaskState.STARTING,
            node=t.node,
            gpus=json.dumps(list(t.gpus)),
            gpu_memory_mb=t.gpu_memory_mb,
            cpu_milli=t.cpu_milli,
            memory_mb=t.memory_mb,
            stop_sent=False,
        )
        for t in tasks
    ]


def _where(tasks: Sequence[NewTask]) -> str:
    parts = []
    for t in tasks:
        gpus = f" GPUs {','.join(map(str, t.gpus))}" if t.gpus else ""
        if t.gpu_memory_mb:
            gpus = f" GPU {t.gpus[0]} (shared, {t.gpu_memory_mb} MB)"
        parts.append(f"{t.role}/{t.index} → {t.node}{gpus}")
    return "; ".join(parts)
