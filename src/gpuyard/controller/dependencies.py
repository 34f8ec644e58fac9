"""The gate before the scheduler: a queued job's dependencies (`after`) and its job array's
running limit (`%N`) decide whether the scheduler sees it at all.

A job the gate keeps back holds no capacity and blocks nothing: the scheduler never sees it,
so it neither reserves nor parks a head; it gets a pending reason (`Dependency`,
`ArrayTaskLimit`) instead. A job whose dependency can no longer be met (an `after.ok` job
that failed or was stopped, an `after.notok` job that succeeded, a job that is gone) ends
FAILED with the reason `DependencyNeverSatisfied`. `decide` is the pure rule; `Gate` reads
what it needs from the store (two or three queries, none when no queued job has an `after`
or an array) and applies the outcome.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuyard.model import JobState, TaskReason
from gpuyard.store import ArrayRecord, JobRecord, Pending, Store

DEPENDENCY = "Dependency"  # pending code: waits for the jobs its `after` names
ARRAY_LIMIT = "ArrayTaskLimit"  # pending code: its array runs as many children as `%N` lets
KINDS = ("ok", "any", "notok")
_NEEDS = {"ok": "to succeed", "any": "to end", "notok": "to fail or be stopped"}


@dataclass(frozen=True, slots=True)
class GateOutcome:
    ready: list[JobRecord] = field(default_factory=list)  # what the scheduler may place
    waiting: dict[str, Pending] = field(default_factory=dict)  # kept back, and why
    never: list[tuple[JobRecord, str]] = field(default_factory=list)  # ends, with a message


def after_of(job: JobRecord) -> Mapping[str, Sequence[str]]:
    """The `after` of a job's stored spec: kind → job ids."""
    after = job.spec.get("after")
    return after if isinstance(after, dict) else {}


def _after_ids(job: JobRecord) -> Iterable[str]:
    for ids in after_of(job).values():
        yield from ids


def _met(kind: str, state: JobState | None) -> bool | None:
    """True: met; False: can never be met; None: not yet."""
    if state is None:
        return False  # a job that is gone never ends
    if not state.is_final:
        return None
    if kind == "any":
        return True
    return (state == JobState.SUCCEEDED) == (kind == "ok")


def dependency(job: JobRecord, states: Mapping[str, JobState]) -> tuple[bool | None, str]:
    """Whether a job's `after` is met (True), never can be (False) or not yet (None), and
    what to tell its owner."""
    waiting = []
    for kind in KINDS:
        for dep in after_of(job).get(kind, ()):
            met = _met(kind, states.get(dep))
            if met is False:
                how = f"ended {states[dep]}" if dep in states else "does not exist"
                return False, f"after.{kind}: job {dep} {how}; it needed it {_NEEDS[kind]}"
            if met is None:
                waiting.append(f"{dep} {_NEEDS[kind]}")
    if waiting:
        return None, f"waits for job {', job '.join(waiting)} (after)"
    return True, ""


def _limited(job: JobRecord, array: ArrayRecord, slots: dict[str, int]) -> Pending | None:
    """None if the child may be placed now (taking one of its array's free slots)."""
    if array.max_running is None:
        return None
    free = slots.setdefault(array.id, array.max_running - array.running)
    if free > 0:
        slots[array.id] = free - 1
        return None
    message = (
        f"job array {array.id} runs at most {array.max_running} at once "
        f"({array.running} running now): index {job.array_index} starts when one ends"
    )
    return Pending(ARRAY_LIMIT, message)


def decide(
    waiting: Sequence[JobRecord],
    states: Mapping[str, JobState],
    arrays: Mapping[str, ArrayRecord],
) -> GateOutcome:
    """Sort queued jobs (in queue order: an array's children by index) into those the
    scheduler may see, those kept back and those whose dependency can never be met."""
    out = GateOutcome()
    slots: dict[str, int] = {}
    for job in waiting:
        met, message = dependency(job, states)
        if met is False:
            out.never.append((job, message))
            continue
        if met is None:
            out.waiting[job.id] = Pending(DEPENDENCY, message)
            continue
        array = arrays.get(job.array_id) if job.array_id else None
        if array is not None and (limited := _limited(job, array, slots)) is not None:
            out.waiting[job.id] = limited
            continue
        out.ready.append(job)
    return out


class Gate:
    """Applies `decide` each cycle: pending reasons written, never-met jobs ended."""

    def __init__(
        self, store: Store, write_pending: Callable[[Mapping[str, Pending]], None]
    ) -> None:
        self.store = store
        self.write_pending = write_pending  # the controller's: only the reasons that changed

    def admit(self, waiting: list[JobRecord], ended: Callable[[JobRecord], Any]) -> list[JobRecord]:
        """The queued jobs the scheduler may see; `ended` is told of each job the gate ends."""
        deps = {dep for job in waiting for dep in _after_ids(job)}
        array_ids = {job.array_id for job in waiting if job.array_id}
        if not deps and not array_ids:
            return waiting
        states = self.store.arrays.states_of(deps)
        arrays = self.store.arrays.many(array_ids)
        ordered = sorted(waiting, key=lambda j: (j.array_id or "", j.array_index or 0, j.seq))
        outcome = decide(ordered, states, arrays)
        if outcome.waiting:
            self.write_pending(outcome.waiting)
        for job, message in outcome.never:
            reason = TaskReason.DEPENDENCY_NEVER_SATISFIED
            ended(self.store.jobs.move(job.id, JobState.FAILED, reason, message))
        ready = {job.id for job in outcome.ready}
        return [job for job in waiting if job.id in ready]
