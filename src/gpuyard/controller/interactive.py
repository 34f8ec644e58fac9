"""Interactive jobs (`gpuyard run`, docs/interactive.md) in the controller: what their tasks
run, and which of them have gone without a session for too long.

An interactive job's task does not run the spec's command: it runs `HOLD_COMMAND`, which
keeps the container open until the task is stopped (and leaves at once, exit 0, on SIGTERM);
the command runs in the session that `gpuyard run` attaches to the task through the API
(api/services/interactive.py). That session's end stops the job. A job that has had no
session attached for its tenant's `interactiveIdleTimeoutS` — none ever attached (the client
died while it waited for a GPU), or the last one went away without the server seeing it
(the server restarted) — is stopped by the controller with reason `SessionIdle`.

"Attached" is read from the job's `session_seen_at`, which every open session on the job
refreshes (api/services/interactive.py, `HEARTBEAT_S`): the servers that hold sessions and
the leader that runs this check may be different processes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpuyard.model import Tenant
from gpuyard.store import JobRecord, TaskRecord

# POSIX sh and sleep only (every image that can run a task's `/bin/sh -c` has them); the
# trap makes SIGTERM end it at once instead of after the stop grace period
HOLD_COMMAND = "trap 'exit 0' TERM INT HUP; while :; do sleep 3600 & wait $!; done"
DEFAULT_IDLE_TIMEOUT_S = Tenant("-").interactive_idle_timeout_s


@dataclass(frozen=True, slots=True)
class IdleSession:
    """An interactive job to stop: nobody attached for its tenant's timeout."""

    job_id: str
    message: str


def idle_sessions(
    running: Sequence[tuple[JobRecord, Sequence[TaskRecord]]],
    tenants: Mapping[str, Tenant],
    now: float,
) -> list[IdleSession]:
    """The running interactive jobs (with their current attempt's tasks) that have had no
    session for their tenant's `interactiveIdleTimeoutS`, counted from their first task's
    start or the last time a session was seen on them, whichever is later."""
    found = []
    for job, tasks in running:
        started = [t.started_at for t in tasks if t.started_at]
        if not started:
            continue  # not started: its client waits for it (or is gone: counted from start)
        tenant = tenants.get(job.tenant)
        timeout = tenant.interactive_idle_timeout_s if tenant else DEFAULT_IDLE_TIMEOUT_S
        seen = job.session_seen_at
        since = max(min(started), seen or 0.0)
        if now - since >= timeout:
            found.append(IdleSession(job.id, _idle_message(job, now - since, timeout, seen)))
    return found


def _idle_message(job: JobRecord, idle_s: float, timeout: int, seen: float | None) -> str:
    what = "no session was ever attached" if seen is None else "its last session went away"
    return (
        f"{what}: no session for {idle_s:.0f} s (tenant {job.tenant}: "
        f"interactiveIdleTimeoutS {timeout})"
    )
