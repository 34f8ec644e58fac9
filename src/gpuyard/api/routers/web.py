"""The web portal: server-rendered pages (Jinja2 + htmx) over the API's own services.

Pages: `/login`, `/jobs` (filters, live states, bulk cancel), `/jobs/{id}` (tasks, GPUs,
events, pending reason, live log, clone, cancel, hold and release, priority), `/submit` (YAML
checked while typed), `/cluster` (nodes × GPUs by tenant) and `/tenants` (quota bars and
queues). Fragments that htmx polls sit beside their page (`/jobs/table`, `/jobs/{id}/live`,
`/jobs/{id}/log`, `/cluster/grid`).

Log-in stores the API token in an HttpOnly, SameSite=Strict cookie and checks it exactly like
the API (`gpuyard.api.auth.user_for_token`); every page asks `gpuyard.api.authz` exactly like
the matching API endpoint. A POST must come from the portal's own origin and, once logged in,
carry the session's CSRF token. Errors are pages (`error.html`), never tracebacks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any
from urllib.parse import parse_qs, quote, urlsplit

from fastapi import APIRouter, Depends, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates

from gpuyard import __version__
from gpuyard.api.auth import Unauthenticated, user_for_token
from gpuyard.api.authz import (
    Forbidden,
    JobAction,
    authorize_job,
    job_actions,
    readable_tenants,
    visible_tenants,
)
from gpuyard.api.deps import ControllerDep
from gpuyard.api.errors import Conflict
from gpuyard.api.schemas.jobcontrol import BulkCancelIn
from gpuyard.api.services import jobcontrol as control
from gpuyard.api.services import jobs as job_svc
from gpuyard.api.services import web as svc
from gpuyard.api.services.gpucharts import gpu_charts
from gpuyard.api.services.images import node_images
from gpuyard.api.services.nodes import node_list
from gpuyard.api.services.queue import queue_view
from gpuyard.api.services.webproxy import job_services, service_task
from gpuyard.model import JobState
from gpuyard.spec import SpecError
from gpuyard.spec.limits import PRIORITY
from gpuyard.store import JobAlreadyEnded, JobNotFound, UserRecord
from gpuyard.web import TEMPLATES

log = logging.getLogger("gpuyard.web")

COOKIE = "gpuyard_session"
MAX_FORM_BYTES = 4 << 20  # a 1 MiB spec, URL-encoded
JOB_LIMIT = 200
STATES = [str(s) for s in JobState]
ACTIVE = ["QUEUED", "SCHEDULED", "RUNNING"]
SESSION_ENDED = "Your session ended"


class LoginRequired(Exception):
    """No valid session cookie: the page answers with a redirect to /login."""


# -- errors as pages -----------------------------------------------------------------------


class PageRoute(APIRoute):
    """Every portal route renders its errors as a page (or a redirect to log in)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except LoginRequired as exc:
                return _to_login(request, str(exc))
            except Exception as exc:  # every error becomes a page, never a traceback
                return _error_page(request, exc)

        return handle


def _to_login(request: Request, why: str) -> Response:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    if request.headers.get("hx-request") and (current := request.headers.get("hx-current-url")):
        target = urlsplit(current).path
    url = f"/login?next={quote(target)}" + (f"&why={quote(why)}" if why else "")
    if request.headers.get("hx-request"):
        response: Response = Response(status_code=401, headers={"HX-Redirect": url})
    else:
        response = RedirectResponse(url, status_code=303)
    response.delete_cookie(COOKIE, path="/")
    return response


def _status_of(exc: Exception) -> tuple[int, str, str]:
    """(HTTP status, title, sentence) for an error, the same statuses as the API."""
    match exc:
        case JobNotFound():
            return 404, "Not found", f"There is no job {exc.args[0]} that you can see."
        case Forbidden():
            return 403, "Not allowed", str(exc)
        case JobAlreadyEnded() | Conflict():
            return 409, "Conflict", str(exc)
        case SpecError():
            return 422, "Invalid job spec", str(exc)
        case RequestValidationError():
            return 400, "Bad request", "; ".join(e["msg"] for e in exc.errors())
        case HTTPException():
            return exc.status_code, "Error", str(exc.detail)
        case LookupError():
            return 404, "Not found", str(exc).strip("'\"")
    log.error("unexpected error on a portal page", exc_info=exc)
    return 500, "Internal error", f"internal error ({type(exc).__name__}); see the server log"


def _error_page(request: Request, exc: Exception) -> Response:
    status, title, message = _status_of(exc)
    if request.headers.get("hx-request"):
        return HTMLResponse(f'<p class="flash error">{_escape(message)}</p>', status)
    return templates.TemplateResponse(
        request,
        "error.html",
        {"user": None, "csrf": "", "status": status, "title": title, "message": message},
        status_code=status,
    )


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


router = APIRouter(route_class=PageRoute, include_in_schema=False)


# -- sessions and forms --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Session:
    user: UserRecord
    secret: str

    @property
    def csrf(self) -> str:
        return svc.csrf_token(self.secret)


def portal_session(request: Request) -> Session:
    secret = request.cookies.get(COOKIE)
    if not secret:
        raise LoginRequired("")
    try:
        return Session(user_for_token(request, secret), secret)
    except Unauthenticated as exc:
        raise LoginRequired(f"{SESSION_ENDED}: {str(exc).split(':')[0]}") from None


SessionDep = Annotated[Session, Depends(portal_session)]


async def read_form(request: Request, session: Session | None) -> dict[str, str]:
    """A URL-encoded POST body, once it is known to come from the portal itself: the same
    origin (Origin, else Referer) and, with a session, its CSRF token."""
    origin = request.headers.get("origin") or request.headers.get("referer") or ""
    if urlsplit(origin).netloc != request.headers.get("host"):
        raise Forbidden("this form must be sent from the gpuyard portal itself (origin check)")
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise HTTPException(413, f"a form may be at most {MAX_FORM_BYTES} bytes")
    parsed = parse_qs(body.decode(errors="replace"), max_num_fields=20)
    fields = {k: v[0] for k, v in parsed.items()}
    sent = fields.get("csrf") or request.headers.get("x-csrf-token")
    if session is not None and not svc.csrf_ok(session.secret, sent):
        raise Forbidden("the form's CSRF token is missing or stale; reload the page and retry")
    return fields


# -- rendering -----------------------------------------------------------------------------


def _ago(iso: str | None, now: float) -> str:
    if not iso:
        return "—"
    seconds = max(0, int(now - datetime.fromisoformat(iso).timestamp()))
    return f"{_span(seconds)} ago" if seconds else "just now"


def _took(start: str | None, end: str | None, now: float) -> str:
    if not start:
        return "—"
    stop = datetime.fromisoformat(end).timestamp() if end else now
    return _span(max(0, int(stop - datetime.fromisoformat(start).timestamp())))


def _span(seconds: int) -> str:
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def _short_time(iso: str | None) -> str:
    return iso.replace("T", " ").split(".")[0] + " UTC" if iso else "—"


templates = Jinja2Templates(directory=str(TEMPLATES))
templates.env.filters.update(short_time=_short_time)
templates.env.globals.update(
    ago=_ago,
    took=_took,
    hue=svc.tenant_hue,
    version=__version__,
    states=STATES,
    log_lines=svc.LOG_TAIL_LINES,
)


def render(
    request: Request, name: str, session: Session, status: int = 200, **context: Any
) -> HTMLResponse:
    ctl = request.app.state.controller
    base = {"user": session.user, "csrf": session.csrf, "now": ctl.clock.now()}
    return templates.TemplateResponse(request, name, base | context, status_code=status)


# -- log in and out ------------------------------------------------------------------------


def _next(target: str | None) -> str:
    """Only a path of this site (never `//host` or a URL) is followed after log-in."""
    if target and target.startswith("/") and not target.startswith("//"):
        return target
    return "/jobs"


@router.get("/")
def home() -> RedirectResponse:
    return RedirectResponse("/jobs", status_code=303)


@router.get("/login")
def login_page(request: Request, next: str = "/jobs", why: str = "") -> HTMLResponse:
    shown = why if why.startswith(SESSION_ENDED) else ""  # no text injected by a link
    context = {"user": None, "csrf": "", "next": _next(next), "error": shown}
    return templates.TemplateResponse(request, "login.html", context)


@router.post("/login")
async def login(request: Request) -> Response:
    form = await read_form(request, None)
    secret = form.get("token", "").strip()
    try:
        user_for_token(request, secret)
    except Unauthenticated as exc:
        context = {
            "user": None,
            "csrf": "",
            "next": _next(form.get("next")),
            "error": str(exc).split(":")[0],
        }
        return templates.TemplateResponse(request, "login.html", context, status_code=401)
    response = RedirectResponse(_next(form.get("next")), status_code=303)
    response.set_cookie(
        COOKIE,
        secret,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    return response


@router.post("/logout")
async def logout(request: Request, session: SessionDep) -> Response:
    await read_form(request, session)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(COOKIE, path="/")
    return response


# -- jobs ----------------------------------------------------------------------------------


def _jobs(ctl: ControllerDep, session: Session, state: str, tenant: str) -> Any:
    states = ACTIVE if state == "active" else ([state] if state in STATES else [])
    visible = visible_tenants(session.user)
    return job_svc.list_jobs(ctl, states, tenant or None, JOB_LIMIT, visible, session.user).jobs


@router.get("/jobs")
def jobs_page(
    request: Request, ctl: ControllerDep, session: SessionDep, state: str = "", tenant: str = ""
) -> HTMLResponse:
    tenants = readable_tenants(session.user, [t.name for t in ctl.store.tenants.list()])
    jobs = _jobs(ctl, session, state, tenant)
    return render(
        request, "jobs.html", session, jobs=jobs, state=state, tenant=tenant, tenants=tenants
    )


@router.get("/jobs/table")
def jobs_table(
    request: Request, ctl: ControllerDep, session: SessionDep, state: str = "", tenant: str = ""
) -> HTMLResponse:
    jobs = _jobs(ctl, session, state, tenant)
    return render(
        request, "partials/jobs_table.html", session, jobs=jobs, state=state, tenant=tenant
    )


def _job_context(ctl: ControllerDep, session: Session, job_id: str) -> dict[str, Any]:
    record = job_svc.get_job(ctl, job_id)
    authorize_job(session.user, record, JobAction.SEE)
    allowed = job_actions(session.user, record)
    return {
        "job": job_svc.job_detail(ctl, job_id, session.user),
        "spec_text": svc.spec_yaml(job_svc.visible_spec(record, session.user)),
        "can_logs": JobAction.LOGS in allowed,
        "can_cancel": JobAction.CANCEL in allowed,
        "final": record.state.is_final,
        "services": [(s, service_task(record, s)) for s in job_services(record)],
        "can_services": JobAction.SERVICES in allowed and record.state == JobState.RUNNING,
    }


@router.get("/jobs/{job_id}")
def job_page(
    request: Request, job_id: str, ctl: ControllerDep, session: SessionDep
) -> HTMLResponse:
    return render(request, "job.html", session, **_job_context(ctl, session, job_id))


@router.get("/jobs/{job_id}/live")
def job_live(
    request: Request, job_id: str, ctl: ControllerDep, session: SessionDep
) -> HTMLResponse:
    return render(request, "partials/job_live.html", session, **_job_context(ctl, session, job_id))


@router.get("/jobs/{job_id}/log")
def job_log(
    request: Request, job_id: str, ctl: ControllerDep, session: SessionDep, task: str = ""
) -> HTMLResponse:
    job = job_svc.get_job(ctl, job_id)
    authorize_job(session.user, job, JobAction.LOGS)
    tail = svc.log_tail(ctl, job, task or None)
    return render(
        request, "partials/log.html", session, job=job, log=tail, final=job.state.is_final
    )


@router.post("/jobs/bulk/cancel")
async def cancel_jobs(request: Request, ctl: ControllerDep, session: SessionDep) -> HTMLResponse:
    """Cancel every active job of the list's filters (state, tenant) the user may cancel, as
    the API's bulk cancel; a page says what was cancelled and what was refused, and why."""
    form = await read_form(request, session)
    state, tenant = form.get("state", ""), form.get("tenant", "")
    if state in STATES and state not in ACTIVE:
        raise HTTPException(409, f"{state.lower()} jobs have ended: there is nothing to cancel")
    states = [state] if state in ACTIVE else ACTIVE
    body = BulkCancelIn.model_validate({"state": states, "tenant": tenant or None})
    result = control.bulk_cancel(ctl, session.user, body)
    return render(request, "cancelled.html", session, result=result, state=state, tenant=tenant)


@router.post("/jobs/{job_id}/cancel")
async def cancel_job(
    request: Request, job_id: str, ctl: ControllerDep, session: SessionDep
) -> Response:
    await read_form(request, session)
    authorize_job(session.user, job_svc.get_job(ctl, job_id), JobAction.CANCEL)
    control.cancel_one(ctl, job_id, session.user.name)
    return RedirectResponse(f"/jobs/{job_id}", status_code=303)


@router.post("/jobs/{job_id}/hold")
async def hold_job(
    request: Request, job_id: str, ctl: ControllerDep, session: SessionDep
) -> Response:
    return await _job_action(request, job_id, ctl, session, "hold")


@router.post("/jobs/{job_id}/release")
async def release_job(
    request: Request, job_id: str, ctl: ControllerDep, session: SessionDep
) -> Response:
    return await _job_action(request, job_id, ctl, session, "release")


@router.post("/jobs/{job_id}/priority")
async def set_priority(
    request: Request, job_id: str, ctl: ControllerDep, session: SessionDep
) -> Response:
    return await _job_action(request, job_id, ctl, session, "priority")


async def _job_action(
    request: Request, job_id: str, ctl: ControllerDep, session: Session, action: str
) -> Response:
    """Hold, release or a new priority, authorised and done as the API's."""
    form = await read_form(request, session)
    job = job_svc.get_job(ctl, job_id)
    if action == "priority":
        authorize_job(session.user, job, JobAction.PRIORITY)
        control.set_priority(ctl, job, _priority(form.get("priority", "")), session.user)
    else:
        authorize_job(session.user, job, JobAction.HOLD)
        (control.hold if action == "hold" else control.release)(ctl, job, session.user)
    return RedirectResponse(f"/jobs/{job_id}", status_code=303)


def _priority(text: str) -> int:
    lo, hi = PRIORITY
    value = text.strip()
    if not value.lstrip("-").isdigit() or not lo <= int(value) <= hi:
        raise HTTPException(422, f"priority must be a whole number from {lo} to {hi}; got {text!r}")
    return int(value)


# -- submit --------------------------------------------------------------------------------


@router.get("/submit")
def submit_page(
    request: Request,
    ctl: ControllerDep,
    session: SessionDep,
    clone: str = "",
    example: str = "",
) -> HTMLResponse:
    examples = svc.examples()
    text = examples.get(example, svc.STARTER)
    if clone:
        job = job_svc.get_job(ctl, clone)
        authorize_job(session.user, job, JobAction.SEE)
        # the document it was submitted as (an OpenPAI job's original), secrets as visible
        text = svc.spec_yaml(job_svc.original_document(job, session.user)["document"])
    checked = svc.check_spec(ctl, session.user, text)
    return render(
        request,
        "submit.html",
        session,
        text=text,
        examples=examples,
        example=example,
        clone=clone,
        checked=checked,
    )


@router.post("/submit/validate")
async def validate_spec(request: Request, ctl: ControllerDep, session: SessionDep) -> HTMLResponse:
    form = await read_form(request, session)
    checked = svc.check_spec(ctl, session.user, form.get("spec", ""))
    return render(request, "partials/validation.html", session, checked=checked)


@router.post("/submit")
async def submit_job(request: Request, ctl: ControllerDep, session: SessionDep) -> Response:
    form = await read_form(request, session)
    text = form.get("spec", "")
    checked = svc.check_spec(ctl, session.user, text)
    if not checked.ok or checked.spec is None:
        return render(
            request,
            "submit.html",
            session,
            status=422,
            text=text,
            examples=svc.examples(),
            example="",
            clone="",
            checked=checked,
        )
    job = job_svc.submit(ctl, checked.spec, session.user.name, checked.loaded)
    return RedirectResponse(f"/jobs/{job.id}", status_code=303)


# -- cluster and tenants -------------------------------------------------------------------


def _cluster_context(request: Request, ctl: ControllerDep, session: Session) -> dict[str, Any]:
    nodes = node_list(ctl, visible_tenants(session.user))
    readings = request.app.state.gpu_readings  # every GPU's last hour (None: no server's)
    return {"nodes": nodes.nodes, "tenant_of": svc.gpu_tenants(ctl, nodes),
            "node_images": node_images(ctl, session.user.is_admin),
            "gpu_charts": gpu_charts(readings.last_hour if readings else None, nodes.nodes)}


@router.get("/cluster")
def cluster_page(request: Request, ctl: ControllerDep, session: SessionDep) -> HTMLResponse:
    return render(request, "cluster.html", session, **_cluster_context(request, ctl, session))


@router.get("/cluster/grid")
def cluster_grid(request: Request, ctl: ControllerDep, session: SessionDep) -> HTMLResponse:
    context = _cluster_context(request, ctl, session)
    return render(request, "partials/cluster_grid.html", session, **context)


@router.get("/tenants")
def tenants_page(request: Request, ctl: ControllerDep, session: SessionDep) -> HTMLResponse:
    queue = queue_view(ctl, visible_tenants(session.user))
    capacity = {c.flavor: c for c in queue.cluster}
    return render(request, "tenants.html", session, queue=queue, capacity=capacity)
