"""What a job's task ends mean for the job: success, retry (counted or not), or failure.

Pure decisions on records; the controller applies them. Failure classes (model.states) decide
retries: `invalid` never, `user` while `retryCount` allows, `platform` always, uncounted.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from gpuyard.model import FailureClass, JobState, TaskReason, TaskState, failure_class
from gpuyard.runtime.types import TaskExit
from gpuyard.store import JobRecord, TaskRecord


class Verdict(enum.Enum):
    WAIT = "wait"  # tasks still active
    SUCCEED = "succeed"
    RETRY = "retry"
    RETRY_UNCOUNTED = "retry-uncounted"
    FAIL = "fail"
    STOP = "stop"


@dataclass(frozen=True, slots=True)
class Outcome:
    verdict: Verdict
    reason: str | None = None
    message: str | None = None

    @property
    def job_state(self) -> JobState:
        return {
            Verdict.SUCCEED: JobState.SUCCEEDED,
            Verdict.FAIL: JobState.FAILED,
            Verdict.STOP: JobState.STOPPED,
        }.get(self.verdict, JobState.QUEUED)


def task_end_state(exit_: TaskExit, stop_reason: str | None) -> tuple[TaskState, str]:
    """A task's final state and reason: what the runtime saw, unless we stopped it."""
    if stop_reason is not None:
        return TaskState.STOPPED, stop_reason
    if exit_.reason == TaskReason.COMPLETED:
        return TaskState.SUCCEEDED, exit_.reason
    return TaskState.FAILED, exit_.reason


def first_failure(tasks: Sequence[TaskRecord]) -> TaskRecord | None:
    failed = [t for t in tasks if t.state == TaskState.FAILED]
    return min(failed, key=lambda t: (t.finished_at or 0, t.id)) if failed else None


def decide(job: JobRecord, tasks: Sequence[TaskRecord]) -> Outcome:
    """The job's outcome once every task of its current attempt has ended (else WAIT)."""
    if not tasks or any(not t.state.is_final for t in tasks):
        return Outcome(Verdict.WAIT)
    if all(t.state == TaskState.SUCCEEDED for t in tasks):
        return Outcome(Verdict.SUCCEED, TaskReason.COMPLETED)
    if job.stop_requested == TaskReason.TIMEOUT:
        return Outcome(Verdict.FAIL, TaskReason.TIMEOUT, "the job ran longer than its maxRuntime")
    if job.stop_requested == TaskReason.PREEMPTED:
        return Outcome(Verdict.RETRY_UNCOUNTED, TaskReason.PREEMPTED, "preempted: requeued")
    if job.stop_requested is not None:
        return Outcome(Verdict.STOP, job.stop_requested)
    failed = first_failure(tasks)
    if failed is None:  # stopped without a request: the node's agent stopped it
        return Outcome(Verdict.RETRY_UNCOUNTED, TaskReason.AGENT_ERROR, "tasks stopped unasked")
    reason = failed.reason or TaskReason.AGENT_ERROR
    message = f"task {failed.name} ended {reason}" + (
        f": {failed.message}" if failed.message else ""
    )
    cls = failure_class(reason)
    if cls is FailureClass.PLATFORM:
        return Outcome(Verdict.RETRY_UNCOUNTED, reason, message)
    if cls is FailureClass.USER and job.retries_used < job.retry_count:
        return Outcome(Verdict.RETRY, reason, message)
    return Outcome(Verdict.FAIL, reason, message)
