"""`GET /metrics`: Prometheus' text format, for the scraper and platform admins only.

A scrape needs `Authorization: Bearer <token>` with either the scrape token
(`app.state.metrics_token`: `gpuyard up` reads it from `--metrics-token-file` /
`$GPUYARD_METRICS_TOKEN_FILE`, or makes `<data dir>/metrics-token`), a token of its own since
a scraper is no user, or a platform admin's API token. Without one: 401; a valid token of a
user who is no platform admin: 403. The series name every tenant's jobs.

`app.state.metrics_open` (`gpuyard up --metrics-open`) serves it to anyone, without the labels
that name a job, a task or a user (`metrics.WithoutJobs`: summed by tenant, node, GPU).
DCGM GPU and task readings come from every node's agent (`engine.readings`), waited for at most
half of Prometheus' scrape timeout (its `X-Prometheus-Scrape-Timeout-Seconds` header) and never
more than 2 s, so that a node that does not answer costs its own series, not the whole scrape.
"""

from __future__ import annotations

import hmac
from contextvars import ContextVar

from fastapi import APIRouter, FastAPI, Request, Response

from gpuyard.api.auth import Unauthenticated, bearer_token, user_for_token
from gpuyard.api.authz import Forbidden
from gpuyard.api.schemas import error_responses
from gpuyard.api.services.metrics import NODE_READINGS_TIMEOUT_S, cluster_sample, readings_timeout
from gpuyard.controller import Controller
from gpuyard.metrics import CONTENT_TYPE, ClusterCollector, WithoutJobs, build_registry, render

router = APIRouter(tags=["metrics"])
SCRAPE_TIMEOUT_HEADER = "X-Prometheus-Scrape-Timeout-Seconds"
_readings_timeout = ContextVar("readings_timeout", default=NODE_READINGS_TIMEOUT_S)


def install_metrics(app: FastAPI, controller: Controller) -> None:
    """The route, and one registry: the scrape-time collector and the controller's counters.
    Until the server sets a scrape token, only platform admins may scrape."""
    app.state.metrics_token = None
    app.state.metrics_open = False
    app.state.gpu_readings = None  # the server's GpuReadings: every GPU's last hour (portal)
    collector = ClusterCollector(lambda: cluster_sample(controller, _readings_timeout.get()))
    app.state.metrics_registry = build_registry(collector, controller.instruments)
    app.state.metrics_public = WithoutJobs(app.state.metrics_registry)
    app.include_router(router)


@router.get("/metrics", response_class=Response, responses=error_responses(401, 403))
def metrics(request: Request) -> Response:
    """Every gpuyard metric (docs/observability.md), read now."""
    state = request.app.state
    _readings_timeout.set(readings_timeout(request.headers.get(SCRAPE_TIMEOUT_HEADER)))
    if state.metrics_open:
        return Response(render(state.metrics_public), media_type=CONTENT_TYPE)
    _check_scraper(request)
    return Response(render(state.metrics_registry), media_type=CONTENT_TYPE)


def _check_scraper(request: Request) -> None:
    """The scrape token, or a platform admin's API token."""
    given = bearer_token(request)  # 401 without one
    token: str | None = request.app.state.metrics_token
    if token and hmac.compare_digest(given.encode(), token.encode()):
        return
    try:
        user = user_for_token(request, given)
    except Unauthenticated:
        raise Unauthenticated(
            "/metrics needs the scrape token or a platform admin's API token", "invalid_token"
        ) from None
    if not user.is_admin:
        raise Forbidden(f"/metrics is for the scraper and platform admins; {user.name} is neither")
