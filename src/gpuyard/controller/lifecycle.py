"""What a job's task ends mean for the job: success, retry (counted or not), or failure.

Pure decisions on records; the controller applies them. Failure classes (model.states) decide
retries: `invalid` never, `user` while `retryCount` allows, `platform` always, uncounted.

Completion policy (OpenPAI's, per role; docs/controller.md): task ends are taken in the order
they happened; the first that reaches a threshold decides the attempt, and the tasks still
running are stopped (`Outcome.stop_rest`):
- `minFailedTasks` (default 1; -1 never) failed tasks of a role: the attempt failed, with the
  reason of the task that reached it (retried or not by its class). Only `user` failures
  count: a `platform` failure (NodeLost, AgentError) always ends the attempt and requeues the
  job, an `invalid` one (ImageError, ...) always fails it.
- `minSucceededTasks` (default -1: none) succeeded tasks of a role: the job succeeded.
Once every task has ended with no threshold reached, the job succeeded (OpenPAI's "all tasks
completed and no policy triggered"): failures under `minFailedTasks` are tolerated.

A job without gang allocation may have tasks not placed yet (`unplaced`): while no threshold
is reached, no stop was asked and no platform failure or unasked stop happened, it waits for
them even when every placed task has ended; once its end is decided they are cancelled (never
placed: the end's message says how many).

An interactive job ends with its session (`session_outcome`): the exit code of its command
decides between SUCCEEDED and FAILED; a client gone or nobody attached is STOPPED.

Platform failures (AgentError, NodeLost: not a preemption) are retried with exponential backoff
(`Backoff`: 2 s, 4 s, ... up to 5 min) and end the job as `PlatformError` after `cap` of them in
a row; an attempt that ran for `healthy_s` before its platform failure starts the count anew.
"""

from __future__ import annotations

import enum
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from gpuyard.model import FailureClass, JobState, TaskReason, TaskState, failure_class
from gpuyard.runtime.types import TaskExit
from gpuyard.spec import JobSpec
from gpuyard.store import JobRecord, TaskRecord

NEVER = -1
SESSION_EXIT = re.compile(r"\(exit (-?\d+)\)$")


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
    stop_rest: bool = False  # WAIT: the attempt is decided, stop the tasks still running

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


@dataclass(frozen=True, slots=True)
class Backoff:
    """How platform failures are retried: exponential delays, then a cap."""

    base_s: float = 2.0
    max_s: float = 300.0
    cap: int = 8  # platform failures in a row before the job ends as PlatformError
    healthy_s: float = 600.0  # an attempt that ran this long resets the count

    def delay_s(self, failures: int) -> float:
        return min(self.max_s, self.base_s * 2 ** max(0, failures - 1))


def platform_retry(
    job: JobRecord, outcome: Outcome, ran_s: float | None, backoff: Backoff
) -> tuple[Outcome, int, float]:
    """After a retry verdict: what to do, the platform failures in a row, and the delay (s).

    Only platform failures (not preemptions) back off; past the cap the job fails.
    """
    reason = outcome.reason or ""
    if outcome.verdict is not Verdict.RETRY_UNCOUNTED or reason == TaskReason.PREEMPTED:
        return outcome, 0, 0.0
    if failure_class(reason) is not FailureClass.PLATFORM:
        return outcome, 0, 0.0
    before = 0 if ran_s is not None and ran_s >= backoff.healthy_s else job.platform_failures
    failures = before + 1
    if failures > backoff.cap:
        message = f"{failures - 1} platform failures in a row, the last: {outcome.message}"
        return Outcome(Verdict.FAIL, TaskReason.PLATFORM_ERROR, message), failures, 0.0
    return outcome, failures, backoff.delay_s(failures)


@dataclass(frozen=True, slots=True)
class Completion:
    """One role's completion policy: how many failed / succeeded tasks decide (-1: none)."""

    min_failed: int = 1
    min_succeeded: int = NEVER


def completion_policy(spec: JobSpec) -> dict[str, Completion]:
    return {
        name: Completion(role.min_failed, role.min_succeeded)
        for name, role in spec.task_roles.items()
    }


def first_failure(tasks: Sequence[TaskRecord]) -> TaskRecord | None:
    failed = [t for t in tasks if t.state == TaskState.FAILED]
    return min(failed, key=lambda t: (t.finished_at or 0, t.id)) if failed else None


def first_platform_failure(tasks: Sequence[TaskRecord]) -> TaskRecord | None:
    """The first task that failed for the platform's reason (NodeLost, AgentError...), if any."""
    platform = FailureClass.PLATFORM
    return first_failure(
        [t for t in tasks if failure_class(t.reason or TaskReason.AGENT_ERROR) is platform]
    )


def failure_outcome(job: JobRecord, failed: TaskRecord) -> Outcome:
    """What one task's failure means for the job: retry (counted or not) or fail."""
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


def triggered(
    job: JobRecord, tasks: Sequence[TaskRecord], policy: Mapping[str, Completion]
) -> Outcome | None:
    """The outcome that the first task end reaching a threshold decided, if any did."""
    ended = sorted((t for t in tasks if t.state.is_final), key=lambda t: (t.finished_at or 0, t.id))
    failed: Counter[str] = Counter()
    succeeded: Counter[str] = Counter()
    for t in ended:
        rule = policy.get(t.role, Completion())
        if t.state == TaskState.FAILED:
            if failure_class(t.reason or TaskReason.AGENT_ERROR) is not FailureClass.USER:
                return failure_outcome(job, t)
            failed[t.role] += 1
            if rule.min_failed != NEVER and failed[t.role] >= rule.min_failed:
                return failure_outcome(job, t)
        elif t.state == TaskState.SUCCEEDED:
            succeeded[t.role] += 1
            if rule.min_succeeded != NEVER and succeeded[t.role] >= rule.min_succeeded:
                message = (
                    f"{succeeded[t.role]} task(s) of role {t.role} succeeded "
                    f"(minSucceededTasks {rule.min_succeeded})"
                )
                return Outcome(Verdict.SUCCEED, TaskReason.COMPLETED, message)
    return None


def unplaced(spec: JobSpec, tasks: Sequence[TaskRecord]) -> int:
    """Tasks of the attempt without a row yet (only a job without gang allocation has any)."""
    return 0 if spec.gang else max(0, spec.task_count - len(tasks))


def decide(
    job: JobRecord,
    tasks: Sequence[TaskRecord],
    policy: Mapping[str, Completion] | None = None,
    not_placed: int = 0,
) -> Outcome:
    """The job's outcome once its current attempt is decided and every task has ended (else
    WAIT, with `stop_rest` once the completion policy decided). `not_placed`: tasks of a job
    without gang allocation not placed yet; they wait, or are cancelled by its end."""
    policy = policy or {}
    if not tasks:
        return Outcome(Verdict.WAIT)
    if any(not t.state.is_final for t in tasks):
        return Outcome(Verdict.WAIT, stop_rest=triggered(job, tasks, policy) is not None)
    outcome = _ended(job, tasks, policy, not_placed)
    if not not_placed or outcome.verdict in (Verdict.WAIT, Verdict.RETRY, Verdict.RETRY_UNCOUNTED):
        return outcome
    note = f"{not_placed} task(s) not placed yet were cancelled"
    return replace(outcome, message=f"{outcome.message}; {note}" if outcome.message else note)


def _ended(
    job: JobRecord, tasks: Sequence[TaskRecord], policy: Mapping[str, Completion], not_placed: int
) -> Outcome:
    """`decide` once every placed task has ended."""
    if not_placed and _waits_for_the_rest(job, tasks, policy):
        return Outcome(Verdict.WAIT)
    if not not_placed and all(t.state == TaskState.SUCCEEDED for t in tasks):
        return Outcome(Verdict.SUCCEED, TaskReason.COMPLETED)
    if job.stop_requested == TaskReason.TIMEOUT:
        return Outcome(Verdict.FAIL, TaskReason.TIMEOUT, "the job ran longer than its maxRuntime")
    if job.stop_requested == TaskReason.PREEMPTED:
        return Outcome(Verdict.RETRY_UNCOUNTED, TaskReason.PREEMPTED, "preempted: requeued")
    if (session := session_outcome(job.stop_requested)) is not None:
        return session
    if job.stop_requested is not None:
        return Outcome(Verdict.STOP, job.stop_requested)
    lost = first_platform_failure(tasks)
    if lost is not None:  # a lost node takes its peers down: their errors follow from it
        return failure_outcome(job, lost)
    decided = triggered(job, tasks, policy)
    if decided is not None:
        return decided
    failed = [t for t in tasks if t.state == TaskState.FAILED]
    if any(t.state == TaskState.STOPPED for t in tasks) or not failed:
        # stopped without a request or a policy: the node's agent stopped it
        return Outcome(Verdict.RETRY_UNCOUNTED, TaskReason.AGENT_ERROR, "tasks stopped unasked")
    message = f"{len(failed)} task(s) failed, fewer than their roles' minFailedTasks"
    return Outcome(Verdict.SUCCEED, TaskReason.COMPLETED, message)


def _waits_for_the_rest(
    job: JobRecord, tasks: Sequence[TaskRecord], policy: Mapping[str, Completion]
) -> bool:
    """Nothing has decided the attempt yet: its tasks not placed yet are still to run."""
    return (
        job.stop_requested is None
        and first_platform_failure(tasks) is None
        and not any(t.state == TaskState.STOPPED for t in tasks)
        and triggered(job, tasks, policy) is None
    )


def session_outcome(stop_reason: str | None) -> Outcome | None:
    """An interactive job stopped by its session (docs/interactive.md): SUCCEEDED when the
    session's command exited 0, FAILED for any other exit code, STOPPED when its client went
    away or nobody attached; None for any other stop. Never retried."""
    kind = TaskReason.kind(stop_reason or "")
    if kind == TaskReason.SESSION_ENDED and stop_reason is not None:
        found = SESSION_EXIT.search(stop_reason)
        code = int(found.group(1)) if found else None
        verdict = Verdict.SUCCEED if code == 0 else Verdict.FAIL
        return Outcome(verdict, stop_reason, f"the session's command exited {code}")
    if kind == TaskReason.SESSION_LOST:
        message = "the session's client went away before its command ended"
        return Outcome(Verdict.STOP, stop_reason, message)
    if kind == TaskReason.SESSION_IDLE:
        message = "no session was attached for the tenant's interactiveIdleTimeoutS"
        return Outcome(Verdict.STOP, stop_reason, message)
    return None
