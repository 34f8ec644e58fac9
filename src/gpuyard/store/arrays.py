"""Submissions in bulk, job arrays and what dependencies read: one transaction each.

`submit_all` stores a batch of jobs and job arrays (each array's parent and all its children)
in one transaction with a few multi-row inserts, so a 1,000-child array is one request and
one commit. A parent is not a job: it names its children (`jobs.array_id`), and its state is
a summary of theirs (`gpuyard.model.array_state`). `states_of` gives the controller's gate
(controller/dependencies.py) the states of the jobs and arrays a queued job waits for.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from sqlalchemy import func, insert, select, update
from sqlalchemy.orm import Session, sessionmaker

from gpuyard.model import Clock, JobState, array_state
from gpuyard.store.jobs import SPEC_WARNING, NewJob, _next_seq
from gpuyard.store.revisions import touch
from gpuyard.store.secrets import SecretBox
from gpuyard.store.tables import EventRow, JobArrayRow, JobRow

ACTIVE = (JobState.SCHEDULED.value, JobState.RUNNING.value)
NOT_ENDED = (JobState.QUEUED.value, *ACTIVE)


@dataclass(frozen=True, slots=True)
class NewArray:
    """A job array to store: its children, each an index and its job (often the same spec)."""

    name: str
    tenant: str
    owner: str | None
    expression: str
    max_running: int | None
    children: Sequence[tuple[int, NewJob]]


@dataclass(frozen=True, slots=True)
class Stored:
    """What a submission stored: the job's or the array's id, and an array's children."""

    id: str
    name: str
    state: JobState
    children: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ArrayChild:
    id: str
    index: int
    state: JobState
    reason: str | None
    started_at: float | None
    finished_at: float | None


@dataclass(frozen=True, slots=True)
class ArrayRecord:
    """A job array's parent with its children's counts by state and the summary state."""

    id: str
    name: str
    tenant: str
    owner: str | None
    expression: str
    size: int
    max_running: int | None
    submitted_at: float
    stop_requested: str | None
    counts: Mapping[JobState, int] = field(default_factory=dict)

    @property
    def state(self) -> JobState:
        return array_state(self.counts)

    @property
    def running(self) -> int:
        return sum(self.counts.get(JobState(s), 0) for s in ACTIVE)


def _new_id() -> str:
    return uuid.uuid4().hex[:12]


class ArrayRepo:
    def __init__(
        self, sessions: sessionmaker[Session], clock: Clock, secrets: SecretBox | None = None
    ) -> None:
        self._sessions = sessions
        self._clock = clock
        self._secrets = secrets or SecretBox.at(None)

    # ---- writes ------------------------------------------------------------------------

    def submit_all(self, entries: Sequence[NewJob | NewArray]) -> list[Stored]:
        """Store every job and array of a batch, or none: one transaction, one insert per
        table. A child's spec is sealed once per distinct document, not once per child."""
        now = self._clock.now()
        jobs: list[dict] = []
        events: list[dict] = []
        arrays: list[dict] = []
        stored: list[Stored] = []
        sealed: dict[tuple[int, int], tuple[str, str | None]] = {}
        with self._sessions.begin() as s:
            seq = _next_seq(s)
            for entry in entries:
                if isinstance(entry, NewJob):
                    jobs.append(self._job_row(entry, seq, now, sealed))
                    events.extend(_submitted(jobs[-1]["id"], entry, now, None))
                    stored.append(Stored(jobs[-1]["id"], entry.name, JobState.QUEUED))
                    seq += 1
                    continue
                array_id = _new_id()
                arrays.append(_array_row(array_id, entry, now))
                children = []
                for index, child in entry.children:
                    row = self._job_row(child, seq, now, sealed)
                    row.update(array_id=array_id, array_index=index)
                    jobs.append(row)
                    events.extend(_submitted(row["id"], child, now, (array_id, index)))
                    children.append(row["id"])
                    seq += 1
                stored.append(Stored(array_id, entry.name, JobState.QUEUED, tuple(children)))
            if arrays:
                s.execute(insert(JobArrayRow), arrays)
            if jobs:
                s.execute(insert(JobRow), jobs)
                touch(s, (row["id"] for row in jobs))
            if events:
                s.execute(insert(EventRow), events)
        return stored

    def _job_row(
        self,
        job: NewJob,
        seq: int,
        now: float,
        sealed: dict[tuple[int, int], tuple[str, str | None]],
    ) -> dict:
        key = (id(job.spec), id(job.original))
        if key not in sealed:  # children sharing one spec share its sealed text
            original = job.original
            sealed[key] = (
                json.dumps(self._secrets.seal(job.spec)),
                json.dumps(self._secrets.seal(original)) if original is not None else None,
            )
        spec, original_spec = sealed[key]
        return {
            "id": _new_id(),
            "seq": seq,
            "name": job.name,
            "tenant": job.tenant,
            "owner": job.owner,
            "state": JobState.QUEUED.value,
            "priority": job.priority,
            "attempt": 1,
            "retry_count": job.retry_count,
            "retries_used": 0,
            "spec": spec,
            "original_spec": original_spec,
            "submitted_at": now,
            "queued_at": now,
            "borrowed": "[]",
            "platform_failures": 0,
            "preemptions": 0,
        }

    def cancel(self, array_id: str, reason: str = "Cancelled") -> int:
        """Ask for every child not ended to be stopped (the controller stops them), and mark
        the parent; how many children were asked."""
        with self._sessions.begin() as s:
            s.execute(
                update(JobArrayRow).where(JobArrayRow.id == array_id).values(stop_requested=reason)
            )
            asked = s.scalars(
                update(JobRow)
                .where(JobRow.array_id == array_id, JobRow.state.in_(NOT_ENDED))
                .values(stop_requested=reason)
                .returning(JobRow.id)
            ).all()
            touch(s, asked)
            return len(asked)

    # ---- reads -------------------------------------------------------------------------

    def get(self, array_id: str) -> ArrayRecord | None:
        with self._sessions() as s:
            row = s.get(JobArrayRow, array_id)
            if row is None:
                return None
            counts = _counts(s, [array_id]).get(array_id, {})
            return _record(row, counts)

    def many(self, array_ids: Collection[str]) -> dict[str, ArrayRecord]:
        """The arrays of these ids that exist, with their counts (two queries)."""
        if not array_ids:
            return {}
        with self._sessions() as s:
            rows = s.scalars(select(JobArrayRow).where(JobArrayRow.id.in_(list(array_ids))))
            found = {r.id: r for r in rows}
            counts = _counts(s, list(found))
            return {i: _record(r, counts.get(i, {})) for i, r in found.items()}

    def children(self, array_id: str) -> list[ArrayChild]:
        q = (
            select(
                JobRow.id,
                JobRow.array_index,
                JobRow.state,
                JobRow.reason,
                JobRow.started_at,
                JobRow.finished_at,
            )
            .where(JobRow.array_id == array_id)
            .order_by(JobRow.array_index)
        )
        with self._sessions() as s:
            return [
                ArrayChild(i, int(idx), JobState(st), reason, started, finished)
                for i, idx, st, reason, started, finished in s.execute(q)
            ]

    def running(self, array_ids: Iterable[str]) -> dict[str, int]:
        """How many children of each array are scheduled or running (one grouped query)."""
        ids = list(set(array_ids))
        if not ids:
            return {}
        q = (
            select(JobRow.array_id, func.count())
            .where(JobRow.array_id.in_(ids), JobRow.state.in_(ACTIVE))
            .group_by(JobRow.array_id)
        )
        with self._sessions() as s:
            return {str(a): int(n) for a, n in s.execute(q)}

    def states_of(self, ids: Collection[str]) -> dict[str, JobState]:
        """The state of each id that names a job or a job array (an array's: its summary)."""
        if not ids:
            return {}
        with self._sessions() as s:
            q = select(JobRow.id, JobRow.state).where(JobRow.id.in_(list(ids)))
            out = {str(i): JobState(st) for i, st in s.execute(q)}
            rest = [i for i in ids if i not in out]
            if rest:
                arrays = s.scalars(select(JobArrayRow.id).where(JobArrayRow.id.in_(rest))).all()
                counts = _counts(s, list(arrays))
                out.update({a: array_state(counts.get(a, {})) for a in arrays})
            return out

    def owners_of(self, ids: Collection[str]) -> dict[str, tuple[str, str | None]]:
        """(tenant, owner) of each id that names a job or a job array: who may see it."""
        if not ids:
            return {}
        with self._sessions() as s:
            out = {
                str(i): (t, o)
                for i, t, o in s.execute(
                    select(JobRow.id, JobRow.tenant, JobRow.owner).where(JobRow.id.in_(list(ids)))
                )
            }
            q = select(JobArrayRow.id, JobArrayRow.tenant, JobArrayRow.owner).where(
                JobArrayRow.id.in_([i for i in ids if i not in out])
            )
            out.update({str(i): (t, o) for i, t, o in s.execute(q)})
            return out


def _counts(s: Session, array_ids: list[str]) -> dict[str, dict[JobState, int]]:
    if not array_ids:
        return {}
    q = (
        select(JobRow.array_id, JobRow.state, func.count())
        .where(JobRow.array_id.in_(array_ids))
        .group_by(JobRow.array_id, JobRow.state)
    )
    out: dict[str, dict[JobState, int]] = {}
    for array_id, state, n in s.execute(q):
        out.setdefault(str(array_id), {})[JobState(state)] = int(n)
    return out


def _record(row: JobArrayRow, counts: Mapping[JobState, int]) -> ArrayRecord:
    return ArrayRecord(
        row.id,
        row.name,
        row.tenant,
        row.owner,
        row.expression,
        row.size,
        row.max_running,
        row.submitted_at,
        row.stop_requested,
        dict(counts),
    )


def _array_row(array_id: str, entry: NewArray, now: float) -> dict:
    return {
        "id": array_id,
        "name": entry.name,
        "tenant": entry.tenant,
        "owner": entry.owner,
        "expression": entry.expression,
        "size": len(entry.children),
        "max_running": entry.max_running,
        "submitted_at": now,
        "stop_requested": None,
    }


def _submitted(job_id: str, job: NewJob, now: float, child: tuple[str, int] | None) -> list[dict]:
    message = f"index {child[1]} of job array {child[0]}" if child else None
    base = {"job_id": job_id, "time": now, "attempt": 1, "task": None}
    first = {**base, "from_state": None, "to_state": "QUEUED", "reason": "Submitted"}
    rows = [{**first, "message": message}]
    for warning in job.warnings:
        rows.append(
            {
                **base,
                "from_state": "QUEUED",
                "to_state": "QUEUED",
                "reason": SPEC_WARNING,
                "message": warning,
            }
        )
    return rows
