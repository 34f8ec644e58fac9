"""Exec and port-forward sessions over a WebSocket: opening one (who may, which task, the
job's event), and pumping its frames both ways.

A session's frames are binary WebSocket messages whose first byte is the channel of
`runtime/streams.py` (0 input, 1 stdout, 2 stderr, 3 the end as JSON), plus 4 from the
client: a terminal's new size as JSON `{"rows", "cols"}`, and 5 from the server, first, once
the session is open: `{"task": "role/index"}`. An empty channel-0 message closes the
input. A session that cannot start ends with one channel-3 message `{"error", "status",
"errors"?}` (the status an HTTP answer would have had).

Node calls (open, read, write) run in worker threads of a limiter of their own, so sessions
never take the threads the API's other endpoints run in; each user may hold
`PER_USER` sessions at once (429 beyond).
"""

from __future__ import annotations

import contextlib
import json
import shlex
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import anyio
import anyio.to_thread
from starlette.websockets import WebSocket, WebSocketDisconnect

from gpuyard.api.authz import JobAction, authorize_job
from gpuyard.api.schemas.sessions import ExecIn, PortIn
from gpuyard.api.services.jobs import get_job, pick_task
from gpuyard.api.services.sshaccess import task_port
from gpuyard.controller import Controller
from gpuyard.controller.sessions import Session, SessionUnavailable, TaskSessions
from gpuyard.store import JobRecord, TaskRecord, UserRecord

PER_USER = 16
THREADS = 128  # a read waits up to READ_WAIT_S in one: one per open session, and writes
READ_WAIT_S = 1.0
EVENT_COMMAND_CHARS = 300
REMEMBERED_PORT_SESSIONS = 4096
RESIZE = 4
OPENED = 5

T = TypeVar("T")


class TooManySessions(Exception):
    """The user holds as many sessions as allowed (HTTP 429)."""


class SessionHub:
    """The app's sessions: its node calls' threads, each user's count, and which
    port-forward runs are recorded on their job already."""

    def __init__(self, controller: Controller, per_user: int = PER_USER) -> None:
        self.tasks = TaskSessions(controller.engine)
        self.per_user = per_user
        self._lock = threading.Lock()
        self._open: dict[str, int] = {}
        self._recorded: OrderedDict[tuple[str, ...], None] = OrderedDict()
        self._limiter: anyio.CapacityLimiter | None = None

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(THREADS)
        return await anyio.to_thread.run_sync(fn, *args, limiter=self._limiter)

    @contextlib.contextmanager
    def claim(self, user: str) -> Iterator[None]:
        with self._lock:
            count = self._open.get(user, 0)
            if count >= self.per_user:
                raise TooManySessions(
                    f"{user} has {count} exec and port-forward sessions open, the most one "
                    "user may; close one"
                )
            self._open[user] = count + 1
        try:
            yield
        finally:
            with self._lock:
                self._open[user] -= 1
                if not self._open[user]:
                    del self._open[user]

    def first_time(self, key: tuple[str, ...]) -> bool:
        """Whether this port-forward run is new (its event not recorded yet)."""
        with self._lock:
            if key in self._recorded:
                return False
            self._recorded[key] = None
            while len(self._recorded) > REMEMBERED_PORT_SESSIONS:
                self._recorded.popitem(last=False)
            return True


def _task_of(ctl: Controller, caller: UserRecord, job_id: str, task: str | None) -> TaskRecord:
    job: JobRecord = get_job(ctl, job_id)
    authorize_job(caller, job, JobAction.EXEC)  # owner, tenant admins, platform admins
    return pick_task(ctl, job, task, None)


def open_exec(ctl: Controller, hub: SessionHub, caller: UserRecord, job_id: str, body: ExecIn
              ) -> Session:
    """Authorise, record the `Exec` event (who, which task, the command), open the session."""
    task = _task_of(ctl, caller, job_id, body.task)
    command = shlex.join(body.command)
    if len(command) > EVENT_COMMAND_CHARS:
        command = command[:EVENT_COMMAND_CHARS] + "…"
    tty = " with a terminal" if body.tty else ""
    ctl.store.jobs.record_event(
        job_id, "Exec", f"{caller.name} ran in {task.name}{tty}: {command}"
    )
    return hub.tasks.exec(task, body.command, body.tty, body.rows, body.cols)


def open_port(ctl: Controller, hub: SessionHub, caller: UserRecord, job_id: str, body: PortIn
              ) -> Session:
    """Authorise as exec, record `PortForward` once per client run, connect to the port."""
    task = _task_of(ctl, caller, job_id, body.task)
    port, named = task_port(ctl, job_id, task, body.port)  # `"ssh"`: its sshd's (gpuyard ssh)
    key = (caller.name, job_id, task.name, str(body.port), body.session or "")
    if body.session is None or hub.first_time(key):
        ctl.store.jobs.record_event(
            job_id, "PortForward", f"{caller.name} connected to {named} of {task.name}"
        )
    return hub.tasks.port(task, port)


@dataclass
class SessionEnd:
    """How a session ended: the node's channel-3 JSON (`{"exitCode": N}`) once it came,
    None while it has not (or the session did not end by itself). Set as soon as it is read,
    so a handler cancelled right after still knows it."""

    frame: dict[str, object] | None = None


async def pump(
    ws: WebSocket, session: Session, hub: SessionHub, end: SessionEnd | None = None
) -> SessionEnd:
    """Frames both ways until the session ends (its channel-3 frame is sent, then the
    socket closed) or the client leaves (the session is closed: its command killed, also
    when this handler is cancelled). What ended it, in `end` (a new one if not given)."""
    end = end if end is not None else SessionEnd()
    try:
        await ws.send_bytes(bytes([OPENED]) + json.dumps({"task": session.task}).encode())
        await _frames_both_ways(ws, session, hub, end)
    finally:
        with anyio.CancelScope(shield=True):
            await hub.run(session.close)
    with contextlib.suppress(RuntimeError, WebSocketDisconnect, OSError):  # the client left
        await ws.close()
    return end


async def _frames_both_ways(
    ws: WebSocket, session: Session, hub: SessionHub, end: SessionEnd
) -> None:
    async with anyio.create_task_group() as group:

        async def to_client() -> None:
            try:
                while True:
                    frames = await hub.run(session.read, READ_WAIT_S)
                    ended = [data for channel, data in frames if channel == 3]
                    if ended:  # kept first: a client that has it may leave before send returns
                        end.frame = _json_object(ended[0])
                    for channel, data in frames:
                        await ws.send_bytes(bytes([channel]) + data)
                    if ended:
                        break
            except SessionUnavailable as e:
                await send_error(ws, 410, str(e))
            group.cancel_scope.cancel()

        group.start_soon(to_client)
        with contextlib.suppress(WebSocketDisconnect, SessionUnavailable):
            await _from_client(ws, session, hub)
        group.cancel_scope.cancel()


def _json_object(payload: bytes) -> dict[str, object] | None:
    try:
        value = json.loads(payload)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


async def _from_client(ws: WebSocket, session: Session, hub: SessionHub) -> None:
    while True:
        message = await ws.receive()
        if message["type"] == "websocket.disconnect":
            return
        data = message.get("bytes")
        if not data:
            continue
        channel, payload = data[0], data[1:]
        if channel == 0 and payload:
            await hub.run(session.write, payload)
        elif channel == 0:
            await hub.run(session.close_input)
        elif channel == RESIZE:
            size = _size(payload)
            if size is not None:
                await hub.run(session.resize, *size)


def _size(payload: bytes) -> tuple[int, int] | None:
    try:
        value = json.loads(payload)
        rows, cols = int(value["rows"]), int(value["cols"])
    except (ValueError, TypeError, KeyError):
        return None
    return rows, cols


async def send_error(
    ws: WebSocket, status: int, detail: str, errors: list[dict[str, str]] | None = None
) -> None:
    """The channel-3 frame of a session that could not start or went away."""
    body: dict[str, object] = {"error": detail, "status": status}
    if errors:
        body["errors"] = errors
    with contextlib.suppress(RuntimeError, WebSocketDisconnect):
        await ws.send_bytes(b"\x03" + json.dumps(body).encode())
