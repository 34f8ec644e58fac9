"""A job's web services through the platform (docs/services.md): the portal's
`/jobs/{id}/services/{name}/…` (the session cookie; errors are pages) and the API's
`/api/v1/jobs/{id}/services/{name}/…` (the bearer token; errors are JSON).

Thin handlers: authenticate as their door does, then `api/services/webproxy.py` authorises
(JobAction.SERVICES), opens a port stream to the serving task and exchanges one HTTP/1.1
request with it; the answer's body is streamed back as it comes.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import anyio
import h11
from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.responses import JSONResponse, RedirectResponse, StreamingResponse
from starlette.background import BackgroundTask

from gpuyard.api.auth import CallerDep
from gpuyard.api.routers.web import PageRoute, SessionDep
from gpuyard.api.services import webproxy as proxy
from gpuyard.api.services.sessions import SessionHub, TooManySessions
from gpuyard.store import UserRecord

METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
portal = APIRouter(route_class=PageRoute, include_in_schema=False)
api = APIRouter(prefix="/api/v1/jobs", include_in_schema=False)


@portal.get("/jobs/{job_id}/services/{name}")
def portal_service_root(request: Request, job_id: str, name: str) -> RedirectResponse:
    """The prefix ends with `/`, so that the app's relative links stay below it."""
    query = f"?{request.url.query}" if request.url.query else ""
    return RedirectResponse(f"/jobs/{job_id}/services/{name}/{query}", status_code=307)


@portal.api_route("/jobs/{job_id}/services/{name}/{path:path}", methods=METHODS)
async def portal_service(
    request: Request, job_id: str, name: str, path: str, session: SessionDep
) -> Response:
    try:
        return await forward(request, session.user, job_id, name, path, "")
    except proxy.ServiceError as e:
        raise HTTPException(e.status, str(e)) from None


@api.api_route("/{job_id}/services/{name}/{path:path}", methods=METHODS)
async def api_service(
    request: Request, job_id: str, name: str, path: str, caller: CallerDep
) -> Response:
    try:
        return await forward(request, caller, job_id, name, path, "/api/v1")
    except proxy.ServiceError as e:
        return JSONResponse({"detail": str(e)}, status_code=e.status)


class _Slot:
    """One of the user's sessions (SessionHub.claim), given back once, whichever way the
    answer ends."""

    def __init__(self, hub: SessionHub, user: str) -> None:
        self._claim = hub.claim(user)
        self._claim.__enter__()
        self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            self._claim.__exit__(None, None, None)


async def forward(
    request: Request, caller: UserRecord, job_id: str, name: str, path: str, door: str
) -> Response:
    hub: SessionHub = request.app.state.sessions
    ctl = request.app.state.controller
    prefix = f"{door}/jobs/{job_id}/services/{name}"
    target = await hub.run(proxy.resolve, ctl, caller, job_id, name, prefix)
    try:
        slot = _Slot(hub, caller.name)
    except TooManySessions as e:
        raise proxy.ServiceError(429, str(e)) from None
    try:
        await hub.run(proxy.record_open, ctl, hub, caller, target)
        session = await hub.run(proxy.open_port, hub, target)
        exchange = proxy.Exchange(hub, session, f"service {name} (port {target.service.port})")
        try:
            await exchange.send_request(proxy.upstream_request(target, _incoming(request, path)),
                                        request.stream())
            head = await exchange.response()
        except BaseException:
            await exchange.close()
            raise
    except BaseException:
        slot.release()
        raise
    return _answer(target, exchange, head, slot)


def _incoming(request: Request, path: str) -> proxy.Incoming:
    return proxy.Incoming(
        method=request.method,
        path="/" + path,
        query=request.url.query,
        headers=list(request.headers.items()),
        host=request.headers.get("host", ""),
        scheme=request.url.scheme,
    )


def _answer(
    target: proxy.Target, exchange: proxy.Exchange, head: h11.Response, slot: _Slot
) -> Response:
    async def body() -> AsyncIterator[bytes]:
        try:
            async for chunk in exchange.body():
                yield chunk
        finally:
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await exchange.close()
            slot.release()

    response = StreamingResponse(body(), status_code=head.status_code,
                                 background=BackgroundTask(slot.release))
    response.raw_headers = [
        (k.encode("latin-1"), v.encode("latin-1")) for k, v in proxy.browser_headers(target, head)
    ]
    return response
