"""The FastAPI application: routers, and errors turned into answers a person can act on.

Every route but `/healthz` and the API docs (`/docs`, `/openapi.json`) needs a bearer token
(`gpuyard.api.auth`); what a caller may do is decided in `gpuyard.api.authz`. `/metrics`
takes the scrape token or a platform admin's (`gpuyard.api.routers.metrics`).
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request, Response
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException

from gpuyard import __version__
from gpuyard.api.apidocs import install_api_docs
from gpuyard.api.auth import Unauthenticated
from gpuyard.api.authz import Forbidden
from gpuyard.api.errors import Conflict, InvalidInput, unreadable_body
from gpuyard.api.methods import allow_header
from gpuyard.api.routers import (
    arrays,
    images,
    jobs,
    nodes,
    notify,
    openpai,
    queue,
    registries,
    tenant_storage,
    tenants,
    tokens,
    usage,
    users,
    web,
    web_arrays,
    web_usage,
)
from gpuyard.api.routers import services as web_services
from gpuyard.api.routers.leader import router as leader_router
from gpuyard.api.routers.metrics import install_metrics
from gpuyard.api.routers.sessions import router as sessions_router
from gpuyard.api.routers.ssh import router as ssh_router
from gpuyard.api.services.logstreams import LogStreams
from gpuyard.api.services.sessions import SessionHub
from gpuyard.controller import Controller
from gpuyard.controller.webhookguard import private_webhooks_of
from gpuyard.spec import SpecError
from gpuyard.store import JobAlreadyEnded, JobNotFound, TenantExists, UserExists
from gpuyard.web import STATIC

log = logging.getLogger("gpuyard.api")


def create_app(controller: Controller) -> FastAPI:
    app = FastAPI(
        title="gpuyard",
        version=__version__,
        description="Multi-tenant GPU cluster platform for deep-learning jobs.",
        docs_url=None,  # served by install_api_docs, from this server's own files
        redoc_url=None,
    )
    app.state.controller = controller
    app.state.log_streams = LogStreams()  # follows per user, log reads off the event loop
    # the tenants a platform admin allowed private webhooks (none else reach 127.0.0.1, ...)
    controller.webhooks.allow_private_for(private_webhooks_of(controller.store))
    for module in (jobs, nodes, queue, tenants, users, tokens, openpai, usage, notify, images):
        app.include_router(module.router)
    app.include_router(arrays.router)  # job arrays and POST /api/v1/jobs:batch
    app.include_router(registries.router)  # tenants' registry credentials (admins)
    app.include_router(tenant_storage.router)  # tenants' named storage (teamwise_storage)
    install_metrics(app, controller)  # GET /metrics: the scrape token or an admin's
    app.state.sessions = SessionHub(controller)  # exec, port-forward, services (docs/exec.md)
    app.include_router(sessions_router)
    app.include_router(ssh_router)  # GET /api/v1/jobs/{id}/ssh: gpuyard ssh's host key
    app.include_router(web_services.api)  # a job's web services (docs/services.md)
    app.include_router(web_services.portal)
    app.include_router(web.router)  # the portal's pages (docs/portal.md)
    app.include_router(web_usage.router)  # the portal's Usage page (docs/accounting.md)
    app.include_router(web_arrays.router)  # the portal's job array page
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    install_api_docs(app)  # GET /docs: Swagger UI, offline
    app.include_router(leader_router)  # GET /api/v1/leader: which server leads (docs/ha.md)

    @app.get("/healthz", tags=["health"])
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.options("/{path:path}", include_in_schema=False)
    def options(request: Request) -> Response:
        """Every path answers OPTIONS with the methods it allows (404 for no path)."""
        if headers := allow_header(request.app, request.url.path):
            return Response(status_code=200, headers=headers)
        return _no_path(request)

    _install_error_handlers(app)
    _install_http_handlers(app)
    return app


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(SpecError)
    async def spec_error(_: Request, exc: SpecError) -> JSONResponse:
        errors = [{"path": e.path, "message": e.message} for e in exc.errors]
        n = len(errors)
        detail = f"the job spec has {n} error{'s' if n != 1 else ''}"
        return JSONResponse({"detail": detail, "errors": errors}, status_code=422)

    @app.exception_handler(RequestValidationError)
    async def request_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"path": ".".join(str(p) for p in e["loc"]), "message": _message(e["msg"])}
            for e in exc.errors()
        ]
        return JSONResponse({"detail": "invalid request", "errors": errors}, status_code=422)

    @app.exception_handler(Unauthenticated)
    async def unauthenticated(_: Request, exc: Unauthenticated) -> JSONResponse:
        return JSONResponse(
            {"detail": str(exc)}, status_code=401, headers={"WWW-Authenticate": exc.challenge}
        )

    @app.exception_handler(Forbidden)
    async def forbidden(_: Request, exc: Forbidden) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=403)

    @app.exception_handler(InvalidInput)
    async def invalid(_: Request, exc: InvalidInput) -> JSONResponse:
        return JSONResponse({"detail": exc.detail, "errors": exc.errors}, status_code=422)

    @app.exception_handler(TenantExists)
    @app.exception_handler(UserExists)
    @app.exception_handler(Conflict)
    async def conflict(_: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=409)

    @app.exception_handler(JobNotFound)
    async def not_found(_: Request, exc: JobNotFound) -> JSONResponse:
        return JSONResponse({"detail": f"no job {exc.args[0]}"}, status_code=404)

    @app.exception_handler(LookupError)
    async def lookup(_: Request, exc: LookupError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=404)

    @app.exception_handler(JobAlreadyEnded)
    async def ended(_: Request, exc: JobAlreadyEnded) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=409)

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error")
        return JSONResponse(
            {"detail": f"internal error ({type(exc).__name__}); see the server log"},
            status_code=500,
        )


def _install_http_handlers(app: FastAPI) -> None:
    """Starlette's HTTP errors in our bodies: a 405 names every allowed method (`Allow`), and
    FastAPI's 400 for a body it could not read is our 422."""

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        if pai := openpai.unrouted(request, exc):
            return pai  # OpenPAI's paths answer in OpenPAI's shape
        if (invalid := unreadable_body(exc)) is not None:
            return JSONResponse({"detail": invalid.detail, "errors": invalid.errors}, 422)
        if exc.status_code == 405:
            return _not_allowed(request)
        return await http_exception_handler(request, exc)


def _not_allowed(request: Request) -> Response:
    """A 405 with every method the path allows (`Allow`). A path no route has is a 404: the
    OPTIONS route matches every path, so Starlette answers 405 for a path that has none. An
    OPTIONS the OPTIONS route did not take (a mount's: /static) answers as that route does."""
    allow = allow_header(request.app, request.url.path)
    if not allow:
        return _no_path(request)
    if request.method == "OPTIONS":
        return Response(status_code=200, headers=allow)
    detail = f"{request.method} is not allowed here; allowed: {allow['Allow']}"
    return JSONResponse({"detail": detail}, status_code=405, headers=allow)


def _no_path(request: Request) -> Response:
    detail = f"no such path: {request.url.path} (the API's paths: /docs)"
    return JSONResponse({"detail": detail}, status_code=404)


def _message(pydantic_message: str) -> str:
    """A validator's own sentence, without pydantic's "Value error, " before it."""
    return pydantic_message.removeprefix("Value error, ")
