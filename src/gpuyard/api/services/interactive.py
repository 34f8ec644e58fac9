"""The session of an interactive job (`gpuyard run`, docs/interactive.md), and the heartbeat
of every session.

An exec request with `attach: true` on a job with `interactive: true` is the job's session:
the server waits until the job's task runs, telling the client on channel 6 what it waits
for (`{"state", "code", "reason"}`, each time it changes), then runs the command as any exec
(`sessions.open_exec`: authorised, an `Exec` event). Whatever ends the session ends the job,
through the controller's stop (`JobRepo.request_stop`, then the job state machine):

| the session ended because | stop reason | the job |
|---|---|---|
| its command exited N | `SessionEnded(exit N)` | SUCCEEDED for 0, else FAILED |
| the client went away (closed, killed, cut off), or the stream broke | `SessionLost` | STOPPED |

The server notices a client that went away by its socket, while the job waits as while the
command runs: a client killed while its job is queued stops the job too. Each case is also
an event on the job (`SessionEnded`, `SessionLost`) saying who and why.

Every open session (exec, port-forward, attached or not) marks its job's
`session_seen_at` at its start, every `HEARTBEAT_S` and at its end: the controller stops an
interactive job that has had none for its tenant's `interactiveIdleTimeoutS`
(controller/interactive.py), whichever server holds the sessions.
"""

from __future__ import annotations

import contextlib
import json

import anyio
from starlette.websockets import WebSocket

from gpuyard.api.authz import JobAction, authorize_job
from gpuyard.api.schemas.sessions import ExecIn
from gpuyard.api.services.jobs import get_job, pick_task
from gpuyard.api.services.sessions import SessionEnd, SessionHub, open_exec, pump, send_error
from gpuyard.controller import Controller
from gpuyard.controller.sessions import Session, SessionUnavailable
from gpuyard.model import JobState, TaskReason, TaskState
from gpuyard.store import JobAlreadyEnded, JobNotFound, JobRecord, UserRecord

HEARTBEAT_S = 30.0  # well under the shortest idle timeout a tenant may set (60 s)
POLL_S = 0.5  # how often a waiting session reads its job
WAITING = 6  # the channel of the progress frames, before channel 5

Progress = dict[str, str | None]


def check_attach(ctl: Controller, caller: UserRecord, job_id: str) -> JobRecord:
    """The job, if `caller` may attach to it (as exec) and it has a session to attach."""
    job = get_job(ctl, job_id)
    authorize_job(caller, job, JobAction.EXEC)
    if job.spec.get("interactive") is not True:
        raise SessionUnavailable(
            f"job {job_id} is not interactive: only a job with interactive: true (gpuyard "
            "run) has a session to attach to; gpuyard exec runs a command in any running job"
        )
    if job.state.is_final:
        raise SessionUnavailable(f"job {job_id} already ended {job.state}")
    return job


async def attach(
    ws: WebSocket, ctl: Controller, hub: SessionHub, caller: UserRecord, job_id: str, body: ExecIn
) -> None:
    """Be the job's session: wait for its task, run the command, then end the job with the
    session, however it ended (a refusal before this ends nothing)."""
    await hub.run(check_attach, ctl, caller, job_id)
    end = SessionEnd()
    why = "the client went away while the job waited to start"
    try:
        if await wait_for_task(ws, ctl, hub, job_id, body.task):
            session = await hub.run(open_exec, ctl, hub, caller, job_id, body)
            why = "the client went away, or the connection to the task was lost"
            await pump_seen(ws, session, hub, ctl, job_id, end)
    except (LookupError, SessionUnavailable) as e:  # answered by the router (404, 409, 410)
        why = f"the session could not open: {e}"
        raise
    finally:
        with anyio.CancelScope(shield=True):
            await hub.run(end_job, ctl, job_id, caller.name, end.frame, why)


def end_job(
    ctl: Controller, job_id: str, who: str, end: dict[str, object] | None, why: str
) -> None:
    """Stop the job because its session ended: `SessionEnded(exit N)` when its command
    exited, else `SessionLost`; an event says whose session and why."""
    code = end.get("exitCode") if end else None
    if isinstance(code, int) and not isinstance(code, bool):
        reason = TaskReason.session_ended(code)
        message = f"{who}'s session ended: its command exited {code}"
    else:
        reason = TaskReason.SESSION_LOST
        message = f"{who}'s session ended before its command did: {why}"
    ctl.store.jobs.note(job_id, TaskReason.kind(reason), message)
    with contextlib.suppress(JobNotFound, JobAlreadyEnded):
        ctl.store.jobs.request_stop(job_id, reason)
    ctl.wake()


async def wait_for_task(
    ws: WebSocket, ctl: Controller, hub: SessionHub, job_id: str, task: str | None
) -> bool:
    """Until the job's task runs (True). False when the client went away, or the job ended
    first (the client is told why: 410)."""
    running = gone = False
    failure: Exception | None = None
    async with anyio.create_task_group() as group:

        async def watch_client() -> None:
            nonlocal gone
            await _until_gone(ws)
            gone = True
            group.cancel_scope.cancel()

        group.start_soon(watch_client)
        try:
            running = await _poll(ws, ctl, hub, job_id, task)
        except Exception as e:  # raised below, itself: not wrapped in the group's ExceptionGroup
            failure = e
        group.cancel_scope.cancel()
    if failure is not None:
        raise failure
    return running and not gone


async def _until_gone(ws: WebSocket) -> None:
    """Read (and drop) what the client sends before its session opens, until it leaves."""
    while (await ws.receive())["type"] != "websocket.disconnect":
        pass


async def _poll(
    ws: WebSocket, ctl: Controller, hub: SessionHub, job_id: str, task: str | None
) -> bool:
    told: Progress | None = None
    while True:
        job, progress = await hub.run(_progress, ctl, job_id, task)
        if job.state.is_final:
            await send_error(ws, 410, _ended_first(job))
            return False
        if progress is None:
            return True
        if progress != told:
            await ws.send_bytes(bytes([WAITING]) + json.dumps(progress).encode())
            told = progress
        await anyio.sleep(POLL_S)


def _progress(ctl: Controller, job_id: str, task: str | None) -> tuple[JobRecord, Progress | None]:
    """The job, and what its session waits for (None: its task runs)."""
    job = get_job(ctl, job_id)
    if job.state == JobState.QUEUED or job.state.is_final:
        return job, {"state": str(job.state), "code": job.pending_code,
                     "reason": job.pending_reason}
    picked = pick_task(ctl, job, task, None)
    if picked.state == TaskState.RUNNING:
        return job, None
    return job, {"state": str(job.state), "code": picked.reason, "reason": picked.message}


def _ended_first(job: JobRecord) -> str:
    detail = f": {job.message}" if job.message else ""
    return f"job {job.id} ended {job.state} ({job.reason}) before its session opened{detail}"


async def pump_seen(
    ws: WebSocket,
    session: Session,
    hub: SessionHub,
    ctl: Controller,
    job_id: str,
    end: SessionEnd | None = None,
) -> None:
    """`pump` (what ended the session in `end`), with the job's `session_seen_at` marked
    now, every `HEARTBEAT_S` while the session lasts, and at its end."""
    failure: Exception | None = None
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(_heartbeat, ctl, hub, job_id)
            try:
                await pump(ws, session, hub, end)
            except Exception as e:  # raised below, itself: not in the group's ExceptionGroup
                failure = e
            group.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await hub.run(ctl.store.jobs.session_seen, job_id)
    if failure is not None:
        raise failure


async def _heartbeat(ctl: Controller, hub: SessionHub, job_id: str) -> None:
    while True:
        await hub.run(ctl.store.jobs.session_seen, job_id)
        await anyio.sleep(HEARTBEAT_S)
