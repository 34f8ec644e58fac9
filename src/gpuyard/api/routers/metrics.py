"""`GET /metrics`: Prometheus' text format.

Open by default, as Prometheus expects. With a scrape token (`app.state.metrics_token`, set by
`gpuyard up --metrics-token-file`) it needs `Authorization: Bearer <token>`: a token of its own,
separate from the users' API tokens, since a scraper is no user. DCGM GPU readings come from
`app.state.gpu_sampler` (NVML; None: none).
"""

from __future__ import annotations

import hmac

from fastapi import APIRouter, FastAPI, Request, Response

from gpuyard.api.auth import Unauthenticated
from gpuyard.api.services.metrics import cluster_sample
from gpuyard.controller import Controller
from gpuyard.metrics import CONTENT_TYPE, ClusterCollector, build_registry, render

router = APIRouter(tags=["metrics"])


def install_metrics(app: FastAPI, controller: Controller) -> None:
    """The route, and one registry: the scrape-time collector and the controller's counters."""
    app.state.gpu_sampler = None
    app.state.metrics_token = None
    collector = ClusterCollector(lambda: cluster_sample(controller, app.state.gpu_sampler))
    app.state.metrics_registry = build_registry(collector, controller.instruments)
    app.include_router(router)


@router.get("/metrics", response_class=Response)
def metrics(request: Request) -> Response:
    """Every gpuyard metric (docs/observability.md), read now."""
    _check_scrape_token(request)
    return Response(render(request.app.state.metrics_registry), media_type=CONTENT_TYPE)


def _check_scrape_token(request: Request) -> None:
    token: str | None = request.app.state.metrics_token
    if not token:
        return
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip(), token):
        raise Unauthenticated("/metrics needs the scrape token", "invalid_token")
