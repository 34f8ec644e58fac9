"""The FastAPI application: routers, and errors turned into answers a person can act on."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from gpuyard import __version__
from gpuyard.api.routers import jobs, nodes
from gpuyard.controller import Controller
from gpuyard.spec import SpecError
from gpuyard.store import JobAlreadyEnded, JobNotFound

log = logging.getLogger("gpuyard.api")


def create_app(controller: Controller) -> FastAPI:
    app = FastAPI(
        title="gpuyard",
        version=__version__,
        description="Multi-tenant GPU cluster platform for deep-learning jobs.",
    )
    app.state.controller = controller
    app.include_router(jobs.router)
    app.include_router(nodes.router)

    @app.get("/healthz", tags=["health"])
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    _install_error_handlers(app)
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
            {"path": ".".join(str(p) for p in e["loc"]), "message": e["msg"]} for e in exc.errors()
        ]
        return JSONResponse({"detail": "invalid request", "errors": errors}, status_code=422)

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
