"""Into a running task: `WS /api/v1/jobs/{id}/exec` and `WS /api/v1/jobs/{id}/portforward`.

Thin handlers: accept, read the first message (the request, JSON), authenticate by the
`Authorization: Bearer` header only (never the portal's cookie: a page of another site could
make a browser open this socket with it), open the session in a worker thread
(`api/services/sessions.py` authorises, records the job's event and opens it), then pump.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import anyio
from fastapi import APIRouter, WebSocket
from pydantic import BaseModel, ValidationError
from starlette.websockets import WebSocketDisconnect

from gpuyard.api.auth import Unauthenticated, bearer_token, user_for_token
from gpuyard.api.authz import Forbidden
from gpuyard.api.errors import field_path
from gpuyard.api.schemas.sessions import ExecIn, PortIn
from gpuyard.api.services import sessions as svc
from gpuyard.api.services.interactive import attach, pump_seen
from gpuyard.api.services.sessions import SessionHub, TooManySessions, send_error
from gpuyard.controller.sessions import Session, SessionUnavailable
from gpuyard.store import JobNotFound, UserRecord

router = APIRouter(prefix="/api/v1/jobs", tags=["sessions"])

FIRST_MESSAGE_S = 10.0
STATUS: tuple[tuple[type[Exception], int], ...] = (
    (Unauthenticated, 401),
    (Forbidden, 403),
    (JobNotFound, 404),
    (LookupError, 404),
    (SessionUnavailable, 409),
    (TooManySessions, 429),
)


@router.websocket("/{job_id}/exec")
async def exec_session(ws: WebSocket, job_id: str) -> None:
    """Run a command in a task: first message `ExecIn` as JSON, then frames (see
    api/services/sessions.py); the last frame has the command's `exitCode`. With `attach`:
    an interactive job's session (api/services/interactive.py)."""
    await _serve(ws, job_id, ExecIn, svc.open_exec)


@router.websocket("/{job_id}/portforward")
async def port_session(ws: WebSocket, job_id: str) -> None:
    """One TCP connection to a port on the task's loopback: first message `PortIn`."""
    await _serve(ws, job_id, PortIn, svc.open_port)


Opener = Callable[..., Session]


async def _serve(ws: WebSocket, job_id: str, schema: type[BaseModel], opener: Opener) -> None:
    await ws.accept()
    hub: SessionHub = ws.app.state.sessions
    ctl = ws.app.state.controller
    try:
        caller: UserRecord = await hub.run(user_for_token, ws, bearer_token(ws))
        body = await _first_message(ws, schema)
        if body is None:
            return
        with hub.claim(caller.name):
            if isinstance(body, ExecIn) and body.attach:  # an interactive job's own session
                await attach(ws, ctl, hub, caller, job_id, body)
                return
            session = await hub.run(opener, ctl, hub, caller, job_id, body)
            await pump_seen(ws, session, hub, ctl, job_id)
    except WebSocketDisconnect:
        return
    except Exception as e:
        status = next((code for kind, code in STATUS if isinstance(e, kind)), None)
        if status is None:
            raise
        detail = f"no job {job_id}" if isinstance(e, JobNotFound) else str(e)
        await send_error(ws, status, detail)
        with contextlib.suppress(RuntimeError):
            await ws.close()


async def _first_message(ws: WebSocket, schema: type[BaseModel]) -> BaseModel | None:
    """The request, or None after answering a 422 (or a client that said nothing)."""
    with anyio.move_on_after(FIRST_MESSAGE_S):
        text = await ws.receive_text()
        try:
            return schema.model_validate_json(text)
        except ValidationError as e:
            errors = [
                {"path": "body" + ("." + field_path(x["loc"]) if x["loc"] else ""),
                 "message": x["msg"]}
                for x in e.errors()
            ]
            await send_error(ws, 422, "the request has errors", errors)
            await ws.close()
            return None
    await send_error(ws, 408, f"no request within {FIRST_MESSAGE_S:.0f} s")
    await ws.close()
    return None
