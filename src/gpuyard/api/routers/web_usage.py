"""The portal's Usage page (`/usage`): the usage report of `GET /api/v1/usage` as a table,
and three charts drawn by the server as inline SVG from `GET /api/v1/usage/daily`'s data:
GPU-hours, the average wait and the average queue length, per tenant per day. The same services,
the same visibility as the API (docs/accounting.md)."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse

from gpuyard.api.authz import visible_tenants
from gpuyard.api.deps import ControllerDep
from gpuyard.api.errors import InvalidInput
from gpuyard.api.routers.web import PageRoute, SessionDep, render
from gpuyard.api.services.usage import (
    UsageBy,
    Window,
    parse_window,
    usage_daily,
    usage_report,
)
from gpuyard.api.services.usagecharts import lines, stacked_bars

router = APIRouter(route_class=PageRoute, include_in_schema=False)

SINCE_CHOICES = ("24h", "7d", "30d", "90d")


@router.get("/usage")
def usage_page(
    request: Request,
    ctl: ControllerDep,
    session: SessionDep,
    since: str = "30d",
    by: UsageBy = UsageBy.tenant,
) -> HTMLResponse:
    """The report and its charts for the caller's tenants (all for a platform admin)."""
    window = _window(since, ctl.clock.now())
    tenants = visible_tenants(session.user)
    report = usage_report(ctl, tenants, by, window)
    daily = usage_daily(ctl, tenants, window)
    return render(
        request, "usage.html", session, report=report, by=str(by), since=since,
        choices=SINCE_CHOICES, gpu_chart=stacked_bars(daily.gpu_hours, " h"),
        wait_chart=lines(daily.avg_wait_s, " s"),
        queue_chart=lines(daily.avg_queue_length, ""),
    )  # fmt: skip


def _window(since: str, now: float) -> Window:
    """The window from now back to `since`; a bad `since` is a 422 page that says why."""
    try:
        return parse_window(since, None, now)
    except InvalidInput as exc:
        words = "; ".join(f"{e['path'].removeprefix('query.')}: {e['message']}" for e in exc.errors)
        raise HTTPException(422, words) from None
