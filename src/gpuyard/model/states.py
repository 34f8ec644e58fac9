"""Job and task states, the legal job transitions in one table, and failure classes.

A job moves QUEUED → SCHEDULED → RUNNING → SUCCEEDED | FAILED | STOPPED, and back to
QUEUED on a retry or a preemption (a new attempt). Every move is checked against
`JOB_TRANSITIONS`; the controller records each one as an event. A job array's parent is not
a job: its state is a summary of its children's (`array_state`).
"""

from __future__ import annotations

import enum
import signal
from collections.abc import Mapping


class JobState(enum.StrEnum):
    QUEUED = "QUEUED"
    SCHEDULED = "SCHEDULED"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    STOPPED = "STOPPED"

    @property
    def is_final(self) -> bool:
        return self in (JobState.SUCCEEDED, JobState.FAILED, JobState.STOPPED)

    @property
    def holds_resources(self) -> bool:
        return self in (JobState.SCHEDULED, JobState.RUNNING)


JOB_TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    # QUEUED → FAILED: `DependencyNeverSatisfied` (an `after` that can no longer be met)
    # or a platform error; QUEUED → STOPPED: cancelled before it started
    JobState.QUEUED: frozenset({JobState.SCHEDULED, JobState.STOPPED, JobState.FAILED}),
    JobState.SCHEDULED: frozenset(
        {JobState.RUNNING, JobState.QUEUED, JobState.FAILED, JobState.STOPPED, JobState.SUCCEEDED}
    ),
    JobState.RUNNING: frozenset(
        {JobState.SUCCEEDED, JobState.FAILED, JobState.STOPPED, JobState.QUEUED}
    ),
    JobState.SUCCEEDED: frozenset(),
    JobState.FAILED: frozenset(),
    JobState.STOPPED: frozenset(),
}


def array_state(counts: Mapping[JobState, int]) -> JobState:
    """A job array's state from how many of its children are in each state: QUEUED until
    one has started or ended, RUNNING while any is not ended, then FAILED if any failed,
    else STOPPED if any stopped, else SUCCEEDED."""
    active = sum(n for st, n in counts.items() if not st.is_final)
    if active:
        started = sum(n for st, n in counts.items() if st != JobState.QUEUED)
        return JobState.RUNNING if started else JobState.QUEUED
    for end in (JobState.FAILED, JobState.STOPPED):
        if counts.get(end):
            return end
    return JobState.SUCCEEDED


class IllegalTransition(ValueError):
    pass


def check_job_transition(src: JobState, dst: JobState) -> None:
    if dst not in JOB_TRANSITIONS[src]:
        raise IllegalTransition(f"job cannot go from {src} to {dst}")


class TaskState(enum.StrEnum):
    PENDING = "PENDING"  # part of an attempt not started yet
    STARTING = "STARTING"  # handed to the engine, container being created
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    STOPPED = "STOPPED"

    @property
    def is_final(self) -> bool:
        return self in (TaskState.SUCCEEDED, TaskState.FAILED, TaskState.STOPPED)


class TaskReason:
    """Why a task ended, in words a user can act on (DESIGN.md, Job states)."""

    COMPLETED = "Completed"
    OOM_KILLED = "OOMKilled"
    COMMAND_NOT_FOUND = "CommandNotFound"
    IMAGE_ERROR = "ImageError"
    NODE_LOST = "NodeLost"
    PREEMPTED = "Preempted"
    TIMEOUT = "Timeout"
    CANCELLED = "Cancelled"
    AGENT_ERROR = "AgentError"
    INVALID_SPEC = "InvalidSpec"
    IDLE_GPU = "IdleGPU"  # stopped by its tenant's idle-GPU policy
    PULLING_IMAGE = "PullingImage"  # not an end: a STARTING task waits for its image
    # every try of an image pull failed for a transient reason (refused, reset, timeout, DNS,
    # 5xx, 429): the registry's outage, retried as the platform's (runtime/registryerrors.py)
    REGISTRY_UNAVAILABLE = "RegistryUnavailable"
    PLATFORM_ERROR = "PlatformError"  # a job's end: platform failures in a row past the cap
    # a job's end (QUEUED → FAILED): a job it waits on (`after`) ended so that it never can
    DEPENDENCY_NEVER_SATISFIED = "DependencyNeverSatisfied"
    # an interactive job's ends (docs/interactive.md): its session's command exited
    # (`SessionEnded(exit N)`: SUCCEEDED for 0, else FAILED), its client went away before the
    # command ended (`SessionLost`), or no session was attached for the tenant's
    # `interactiveIdleTimeoutS` (`SessionIdle`); both STOPPED
    SESSION_ENDED = "SessionEnded"
    SESSION_LOST = "SessionLost"
    SESSION_IDLE = "SessionIdle"

    @staticmethod
    def error(exit_code: int) -> str:
        return f"Error(exit {exit_code})"

    @staticmethod
    def session_ended(exit_code: int) -> str:
        return f"{TaskReason.SESSION_ENDED}(exit {exit_code})"

    @staticmethod
    def signal(signum: int) -> str:
        try:
            name = signal.Signals(signum).name
        except ValueError:
            name = f"SIG{signum}"
        return f"Signal({name})"

    @staticmethod
    def kind(reason: str) -> str:
        """`Error(exit 3)` → `Error`; `OOMKilled` → `OOMKilled`."""
        return reason.split("(", 1)[0]


class FailureClass(enum.StrEnum):
    NONE = "none"  # not a failure
    INVALID = "invalid"  # never retried
    USER = "user"  # retried, counted against retryCount
    PLATFORM = "platform"  # retried, not counted


_FAILURE_CLASSES: dict[str, FailureClass] = {
    TaskReason.COMPLETED: FailureClass.NONE,
    "Error": FailureClass.USER,
    "Signal": FailureClass.USER,
    TaskReason.OOM_KILLED: FailureClass.USER,
    TaskReason.TIMEOUT: FailureClass.USER,
    TaskReason.COMMAND_NOT_FOUND: FailureClass.INVALID,
    TaskReason.IMAGE_ERROR: FailureClass.INVALID,
    TaskReason.INVALID_SPEC: FailureClass.INVALID,
    TaskReason.IDLE_GPU: FailureClass.INVALID,  # a policy stop: retrying would idle again
    TaskReason.PLATFORM_ERROR: FailureClass.INVALID,  # the retries were what kept failing
    TaskReason.DEPENDENCY_NEVER_SATISFIED: FailureClass.INVALID,  # nothing to retry: not run
    TaskReason.NODE_LOST: FailureClass.PLATFORM,
    TaskReason.PREEMPTED: FailureClass.PLATFORM,
    TaskReason.AGENT_ERROR: FailureClass.PLATFORM,
    TaskReason.REGISTRY_UNAVAILABLE: FailureClass.PLATFORM,
    TaskReason.CANCELLED: FailureClass.NONE,
    # an interactive job ends with its session, never retried: a new attempt would have
    # nobody attached (its state follows the command's exit code: lifecycle.decide)
    TaskReason.SESSION_ENDED: FailureClass.NONE,
    TaskReason.SESSION_LOST: FailureClass.NONE,
    TaskReason.SESSION_IDLE: FailureClass.NONE,
}


def failure_class(reason: str) -> FailureClass:
    """The one table that decides whether a task's end is retried, and whether it counts."""
    return _FAILURE_CLASSES.get(TaskReason.kind(reason), FailureClass.USER)
