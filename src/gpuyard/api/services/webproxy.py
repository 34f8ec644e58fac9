"""A job's web services (`services: {notebook: 8888}`) through the platform: who may open
one, which task serves it, and one HTTP/1.1 exchange with it over a port stream
(docs/services.md).

Each proxied request opens its own port stream to the task (`TaskSessions.port`, the stream
of `gpuyard port-forward`), speaks HTTP/1.1 on it with `Connection: close` (h11 does the
framing both ways) and streams the answer back. What the task is told: the request without the
platform's credentials (no `Authorization`, no portal cookie, no CSRF header) and with
`X-Forwarded-Prefix/Host/Proto`. What the browser is told: the answer without the app's
hop-by-hop headers, its cookies kept below the service's prefix (never the portal's cookie),
and — for a caller who is not the job's owner — a `sandbox` Content-Security-Policy, so that
a page of someone else's task never runs as its caller on the portal's origin.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import h11

from gpuyard.api.authz import JobAction, authorize_job, job_actions
from gpuyard.api.services.jobs import get_job, pick_task
from gpuyard.api.services.sessions import SessionHub
from gpuyard.controller import Controller
from gpuyard.controller.sessions import Session, SessionUnavailable
from gpuyard.model import JobState
from gpuyard.spec.errors import Errors
from gpuyard.spec.models import ServiceSpec
from gpuyard.spec.services import read_services
from gpuyard.store import JobRecord, TaskRecord, UserRecord

PORTAL_COOKIE = "gpuyard_session"
HEAD_WAIT_S = 60.0  # the app's answer must begin within this
IDLE_S = 300.0  # a body that sends nothing for this long is cut
READ_WAIT_S = 1.0
HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
    "transfer-encoding", "upgrade",
})
NOT_TO_TASK = HOP_BY_HOP | {
    "host", "authorization", "cookie", "x-csrf-token", "x-forwarded-for", "x-forwarded-host",
    "x-forwarded-proto", "x-forwarded-prefix", "forwarded", "expect",
}
NOT_TO_BROWSER = HOP_BY_HOP | {
    "set-cookie", "service-worker-allowed", "clear-site-data", "strict-transport-security",
}
SANDBOX = "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads"


class ServiceError(Exception):
    """The service cannot answer: `status` (502, 503, 504, 400) and a sentence for people."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Target:
    """An authorised request's service: its job, the task that serves it, its URL prefix."""

    job: JobRecord
    service: ServiceSpec
    task: TaskRecord
    prefix: str  # /jobs/ID/services/NAME (no trailing slash)
    sandbox: bool  # the caller is not the job's owner


def job_services(job: JobRecord) -> tuple[ServiceSpec, ...]:
    """The services a stored job declares (checked at submission)."""
    services = read_services(Errors(), "services", job.spec.get("services") or {})
    return services or ()


def service_task(job: JobRecord, service: ServiceSpec) -> str:
    return service.task or f"{next(iter(job.spec['taskRoles']))}/0"


def may_open(caller: UserRecord, job: JobRecord) -> bool:
    return JobAction.SERVICES in job_actions(caller, job)


def resolve(ctl: Controller, caller: UserRecord, job_id: str, name: str, prefix: str) -> Target:
    """Authorise (404 for a job the caller cannot see, 403 for one they may not open the
    services of) and find the running task that serves `name`."""
    job = get_job(ctl, job_id)
    authorize_job(caller, job, JobAction.SERVICES)
    service = next((s for s in job_services(job) if s.name == name), None)
    if service is None:
        raise LookupError(f"job {job_id} has no service {name}")
    if job.state != JobState.RUNNING:
        raise ServiceError(
            503, f"job {job_id} is {str(job.state).lower()}: its services answer while it runs"
        )
    try:
        task = pick_task(ctl, job, service_task(job, service), None)
    except LookupError as e:
        raise ServiceError(503, str(e)) from e
    return Target(job, service, task, prefix, sandbox=job.owner != caller.name)


def record_open(ctl: Controller, hub: SessionHub, caller: UserRecord, target: Target) -> None:
    """A `Service` event the first time a user opens a service of a run of the job."""
    key = ("service", caller.name, target.job.id, target.service.name, str(target.job.attempt))
    if hub.first_time(key):
        ctl.store.jobs.record_event(
            target.job.id,
            "Service",
            f"{caller.name} opened service {target.service.name} (port "
            f"{target.service.port} of {target.task.name})",
        )


def open_port(hub: SessionHub, target: Target) -> Session:
    try:
        return hub.tasks.port(target.task, target.service.port)
    except SessionUnavailable as e:
        raise ServiceError(502, f"service {target.service.name}: {e}") from e


@dataclass(frozen=True)
class Incoming:
    """The browser's request, as the router read it."""

    method: str
    path: str  # below the prefix, starting with /
    query: str
    headers: list[tuple[str, str]]
    host: str
    scheme: str


def upstream_request(target: Target, req: Incoming) -> h11.Request:
    """The request the task gets: the platform's credentials out, the forwarded headers in."""
    base = f"/jobs/{target.job.id}/services/{target.service.name}"  # the app's base URL
    path = req.path if target.service.strip_prefix else base + req.path
    path += f"?{req.query}" if req.query else ""
    headers = [(k, v) for k, v in req.headers if k.lower() not in NOT_TO_TASK]
    cookie = _cookies_without_portal(req.headers)
    if cookie:
        headers.append(("cookie", cookie))
    if any(k.lower() == "transfer-encoding" for k, _ in req.headers):
        headers.append(("transfer-encoding", "chunked"))
    headers += [
        ("host", req.host),
        ("connection", "close"),
        ("x-forwarded-prefix", target.prefix),
        ("x-forwarded-host", req.host),
        ("x-forwarded-proto", req.scheme),
    ]
    try:
        return h11.Request(method=req.method, target=path.encode(), headers=headers)
    except h11.LocalProtocolError as e:
        raise ServiceError(400, f"the request cannot be forwarded: {e}") from e


def _cookies_without_portal(headers: list[tuple[str, str]]) -> str:
    pairs = [
        pair.strip()
        for k, v in headers if k.lower() == "cookie"
        for pair in v.split(";")
        if pair.strip() and pair.split("=", 1)[0].strip() != PORTAL_COOKIE
    ]
    return "; ".join(pairs)


def browser_headers(target: Target, response: h11.Response) -> list[tuple[str, str]]:
    """The answer's headers for the browser (see the module's docstring)."""
    out: list[tuple[str, str]] = []
    for raw_name, raw_value in response.headers:
        name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
        if name == "set-cookie":
            cookie = _confined_cookie(value, target.prefix)
            if cookie is not None:
                out.append((name, cookie))
        elif name == "content-security-policy" and target.sandbox:
            continue
        elif name not in NOT_TO_BROWSER:
            out.append((name, value))
    if target.sandbox:
        out.append(("content-security-policy", SANDBOX))
    return out


def _confined_cookie(value: str, prefix: str) -> str | None:
    """The app's cookie kept to the service's path and host (None: dropped, the portal's)."""
    first, *attrs = [part.strip() for part in value.split(";")]
    if first.split("=", 1)[0].strip() == PORTAL_COOKIE:
        return None
    keep = [a for a in attrs if a.split("=", 1)[0].strip().lower() not in ("path", "domain")]
    path = next((a.split("=", 1)[1].strip() for a in attrs
                 if a.lower().startswith("path=")), "")
    if not path.startswith(prefix + "/"):
        path = prefix + "/"
    return "; ".join([first, f"Path={path}", *keep])


class Exchange:
    """One HTTP/1.1 request and its answer over an open port session."""

    def __init__(self, hub: SessionHub, session: Session, what: str) -> None:
        self.hub = hub
        self.session = session
        self.what = what
        self.conn = h11.Connection(h11.CLIENT)
        self._eof = False

    async def send(self, event: h11.Event) -> None:
        try:
            data = self.conn.send(event)
        except h11.LocalProtocolError as e:
            raise ServiceError(400, f"the request cannot be forwarded: {e}") from e
        if data:
            try:
                await self.hub.run(self.session.write, data)
            except SessionUnavailable as e:
                raise ServiceError(502, f"{self.what}: {e}") from e

    async def send_request(self, request: h11.Request, body: AsyncIterator[bytes]) -> None:
        await self.send(request)
        if _has_body(request):
            async for chunk in body:
                if chunk:
                    await self.send(h11.Data(data=chunk))
        await self.send(h11.EndOfMessage())

    async def response(self) -> h11.Response:
        """The answer's head (1xx answers skipped)."""
        while True:
            event = await self.next_event(HEAD_WAIT_S)
            if isinstance(event, h11.Response):
                return event
            if not isinstance(event, h11.InformationalResponse):
                raise ServiceError(502, f"{self.what} closed the connection without answering")

    async def body(self) -> AsyncIterator[bytes]:
        """The answer's body, as it comes; the session is closed at its end."""
        try:
            while True:
                event = await self.next_event(IDLE_S)
                if isinstance(event, h11.Data):
                    yield bytes(event.data)
                else:
                    return
        except ServiceError:
            return  # the head is sent: the browser sees a cut body
        finally:
            await self.close()

    async def next_event(self, wait_s: float) -> h11.Event:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                event = self.conn.next_event()
            except h11.RemoteProtocolError as e:
                raise ServiceError(502, f"{self.what} did not answer in HTTP/1.1: {e}") from e
            if event is not h11.NEED_DATA:
                return event  # type: ignore[return-value]
            if time.monotonic() > deadline:
                raise ServiceError(504, f"{self.what} did not answer within {wait_s:.0f} s")
            await self._receive()

    async def _receive(self) -> None:
        if self._eof:  # h11 wants more after the end: it will say what is wrong
            raise ServiceError(502, f"{self.what} closed the connection mid-answer")
        try:
            frames = await self.hub.run(self.session.read, READ_WAIT_S)
        except SessionUnavailable:
            frames = [(3, b"")]  # the stream is gone: the connection's end
        for channel, data in frames:
            if channel == 1 and data and not self._eof:
                self.conn.receive_data(data)
            elif channel == 3 and not self._eof:
                self._eof = True
                self.conn.receive_data(b"")

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.hub.run(self.session.close)


def _has_body(request: h11.Request) -> bool:
    names = {k.lower() for k, _ in request.headers}
    return b"content-length" in names or b"transfer-encoding" in names
