"""OpenPAI's REST v2 job endpoints (`/rest-server/api/v2/jobs`), so OpenPAI's SDK, its VS Code
extension and scripts talk to gpuyard: thin handlers over `gpuyard.api.services.openpai`.

The same token (`Authorization: Bearer <token>`) and the same authorisation as the native API
(`gpuyard.api.authz`). Every answer that is not a success is OpenPAI's error body,
`{"code": "NoJobError", "message": "..."}`, with OpenPAI's HTTP status: `OpenPaiRoute` turns
whatever a handler or a dependency raises into one. Not in gpuyard's OpenAPI document (OpenPAI's
own swagger describes these paths); docs/openpai.md says what is mapped and what is not.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from gpuyard.api.auth import CallerDep, Unauthenticated
from gpuyard.api.authz import (
    Forbidden,
    JobAction,
    authorize_job,
    authorize_submit,
    job_actions,
    visible_tenants,
)
from gpuyard.api.deps import ControllerDep
from gpuyard.api.errors import field_path
from gpuyard.api.methods import allow_header
from gpuyard.api.schemas import openpai as pai
from gpuyard.api.services import openpai as svc
from gpuyard.spec import SpecError
from gpuyard.store import JobAlreadyEnded, JobNotFound, JobRecord

log = logging.getLogger("gpuyard.api.openpai")

MAX_SPEC_BYTES = 1 << 20
MAX_OFFSET = 10**9  # beyond any store: a larger one would overflow the database's integer
PREFIX = "/rest-server/"
ROLE = r"^[A-Za-z][A-Za-z0-9_]*$"
#: OpenPAI's list filters gpuyard cannot apply: refused rather than silently ignored
UNSUPPORTED_QUERY = ("keyword", "tagsContain", "tagsNotContain", "withTotalCount", "order")
STATE_WORDS = tuple(pai.STATE_FILTER)


class OpenPaiRoute(APIRoute):
    """A route whose every error, its dependencies' too (the token), is OpenPAI's body."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def answer(request: Request) -> Response:
            try:
                return await handler(request)
            except Exception as exc:  # every error becomes OpenPAI's shape, never a traceback
                return error_response(exc)

        return answer


def error_response(exc: Exception) -> JSONResponse:
    if isinstance(exc, Unauthenticated):
        body = pai.error("UnauthorizedUserError", str(exc))
        return JSONResponse(body, 401, headers={"WWW-Authenticate": exc.challenge})
    status, body = _status_and_body(exc)
    return JSONResponse(body, status)


def _status_and_body(exc: Exception) -> tuple[int, dict[str, object]]:
    if isinstance(exc, svc.PaiError):
        return exc.status, pai.error(exc.code, str(exc))
    if isinstance(exc, Forbidden):
        return 403, pai.error("ForbiddenUserError", str(exc))
    if isinstance(exc, JobNotFound):
        return 404, pai.error("NoJobError", f"Job {exc.args[0]} is not found.")
    if isinstance(exc, SpecError):
        return 400, _invalid("InvalidProtocolError", [(e.path, e.message) for e in exc.errors])
    if isinstance(exc, RequestValidationError):
        errors = [(field_path(e["loc"]), e["msg"]) for e in exc.errors()]
        return 400, _invalid("InvalidParametersError", errors)
    if isinstance(exc, JobAlreadyEnded):
        return 409, pai.error("ConflictJobError", str(exc))
    if isinstance(exc, HTTPException):
        code = "InvalidProtocolError" if exc.status_code == 413 else "InvalidParametersError"
        return exc.status_code, pai.error(code, str(exc.detail))
    if isinstance(exc, LookupError):
        return 404, pai.error("NoJobError", str(exc))
    log.exception("unexpected error in the OpenPAI API")
    return 500, pai.error("UnknownError", f"internal error ({type(exc).__name__})")


def unrouted(request: Request, exc: HTTPException) -> Response | None:
    """The app's 404 (no such path) and 405 (not this method) under `/rest-server/`, in
    OpenPAI's shape (`NoApiError`; a 405 keeps its `Allow`); None elsewhere. A 405 of a path
    no route has (the app's OPTIONS route matches every path) is a 404."""
    if not request.url.path.startswith(PREFIX) or exc.status_code not in (404, 405):
        return None
    allow = allow_header(request.app, request.url.path) if exc.status_code == 405 else {}
    status = 405 if allow else 404
    what = "method" if allow else "path"
    message = (
        f"{request.method} {request.url.path}: gpuyard serves no such {what} of OpenPAI's REST "
        "API (the job endpoints of /rest-server/api/v2/jobs: docs/openpai.md)"
    )
    return JSONResponse(pai.error("NoApiError", message), status, allow or None)


def _invalid(code: str, errors: list[tuple[str, str]]) -> dict[str, object]:
    """A 400 naming each bad field: `message` says them all (`path: message`), `errors` lists
    them as gpuyard's own API does."""
    message = "; ".join(f"{p}: {m}" if p else m for p, m in errors)
    return pai.error(code, message, errors=[{"path": p, "message": m} for p, m in errors])


router = APIRouter(
    prefix="/rest-server/api/v2/jobs",
    tags=["openpai"],
    route_class=OpenPaiRoute,
    include_in_schema=False,
)
Framework = Annotated[str, Path(description="OpenPAI's job name: user~name")]


@router.post("", status_code=202)
async def submit_job(request: Request, ctl: ControllerDep, caller: CallerDep) -> JSONResponse:
    """Submit an OpenPAI protocol v2 document (text/yaml); 202 as OpenPAI answers."""
    body = await request.body()
    if len(body) > MAX_SPEC_BYTES:
        raise HTTPException(413, f"a job protocol may be at most {MAX_SPEC_BYTES} bytes")
    content_type = request.headers.get("content-type")
    job = await run_in_threadpool(submit_body, ctl, caller, body, content_type)  # it blocks
    message = f"Update job {job.name} for user {caller.name} successfully."
    headers = {"Location": f"{pai.API}/jobs/{pai.framework_name(job)}"}
    return JSONResponse({"status": 202, "message": message, "jobId": job.id}, 202, headers)


def submit_body(ctl: ControllerDep, caller: CallerDep, body: bytes,
                content_type: str | None) -> JobRecord:  # fmt: skip
    """`submit_job` past reading the request: parse, authorise, store."""
    loaded = svc.read_openpai(ctl, body, content_type)
    authorize_submit(caller, loaded.spec.tenant)
    return svc.submit(ctl, loaded, caller.name)


@router.get("")
def list_jobs(
    request: Request,
    ctl: ControllerDep,
    caller: CallerDep,
    username: str | None = None,
    vc: str | None = None,
    state: str | None = None,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
    limit: Annotated[int, Query(ge=1, le=50000)] = 5000,
) -> JSONResponse:
    """Jobs of the caller's tenants, newest first; `username`, `vc` and `state` take
    comma-separated lists, as OpenPAI's do; at most 1000 jobs an answer."""
    _refuse_unsupported(request)
    query = svc.JobQuery(_words(username), _words(vc), _states(state), offset, limit)
    return JSONResponse(svc.list_jobs(ctl, query, visible_tenants(caller)))


def _refuse_unsupported(request: Request) -> None:
    asked = [k for k in UNSUPPORTED_QUERY if k in request.query_params]
    if asked == ["withTotalCount"] and request.query_params["withTotalCount"] != "true":
        return
    if asked:
        raise svc.PaiError(
            400,
            "InvalidParametersError",
            f"gpuyard does not support the job list's {', '.join(asked)}; filter by "
            "username, vc and state, page with offset and limit (newest first)",
        )


def _words(value: str | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(w for w in value.split(",") if w)


def _states(value: str | None) -> tuple[str, ...]:
    words = _words(value) or ()
    if bad := [w for w in words if w not in STATE_WORDS]:
        raise svc.PaiError(
            400,
            "InvalidParametersError",
            f"state: unknown state {', '.join(bad)}; OpenPAI's states are {', '.join(STATE_WORDS)}",
        )
    return words


@router.get("/{framework}")
def get_job(framework: Framework, ctl: ControllerDep, caller: CallerDep) -> JSONResponse:
    """The newest job of that user and name the caller may see, in OpenPAI's shape."""
    job = svc.find(ctl, framework, visible_tenants(caller))
    authorize_job(caller, job, JobAction.SEE)
    logs = JobAction.LOGS in job_actions(caller, job)  # diagnostics end with log lines
    return JSONResponse(svc.detail(ctl, job, logs))


@router.put("/{framework}/executionType", status_code=202)
def execute_job(
    framework: Framework, body: pai.ExecutionIn, ctl: ControllerDep, caller: CallerDep
) -> JSONResponse:
    """`{"value": "STOP"}` stops the job (its owner, a tenant admin or a platform admin)."""
    job = svc.find(ctl, framework, visible_tenants(caller))
    authorize_job(caller, job, JobAction.CANCEL)
    if body.value != "STOP":
        raise svc.PaiError(
            400,
            "InvalidParametersError",
            f"value: {body.value!r} is not supported; gpuyard takes STOP (START: submit the "
            "job again)",
        )
    svc.stop(ctl, job)
    message = f"Execute job {framework} successfully."
    return JSONResponse({"status": 202, "message": message}, 202)


@router.get("/{framework}/config")
def job_config(framework: Framework, ctl: ControllerDep, caller: CallerDep) -> Response:
    """The document as submitted, in YAML; secrets redacted unless the caller may read them."""
    job = svc.find(ctl, framework, visible_tenants(caller))
    authorize_job(caller, job, JobAction.SEE)
    return Response(svc.config_yaml(job, caller), media_type="text/yaml; charset=utf-8")


@router.get(
    "/{framework}/attempts/{job_attempt}/taskRoles/{role}/taskIndex/{index}"
    "/attempts/{task_attempt}/logs"
)
def task_logs(
    framework: Framework,
    job_attempt: Annotated[int, Path(ge=0, le=100_000)],
    role: Annotated[str, Path(pattern=ROLE, max_length=32)],
    index: Annotated[int, Path(ge=0, le=100_000)],
    task_attempt: Annotated[int, Path(ge=0, le=100_000)],
    ctl: ControllerDep,
    caller: CallerDep,
    tail_mode: Annotated[str | None, Query(alias="tail-mode")] = None,
) -> JSONResponse:
    """Where a task's log is: OpenPAI's `{"locations": [{"name", "uri"}]}`, the uri gpuyard's
    log API (`/api/v1/jobs/{id}/logs?task=...`, the same token). gpuyard runs a task once per
    job attempt, so the task attempt is 0."""
    job = svc.find(ctl, framework, visible_tenants(caller))
    authorize_job(caller, job, JobAction.LOGS)
    if task_attempt != 0:
        raise svc.PaiError(
            404, "NoTaskLogError", f"task attempt {task_attempt}: gpuyard's tasks have only 0"
        )
    url = svc.log_url(ctl, job, job_attempt, role, index, tail_mode == "true")
    return JSONResponse(pai.log_locations(url))
