"""The usage endpoints: GPU- and CPU-hours, jobs, waits and preemption losses per tenant,
user or job (`GET /api/v1/usage`), and per tenant per day for charts (`.../daily`), from the
usage roll-up. A platform admin sees every tenant; anyone else the tenants they have a role
in (viewers too)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from gpuyard.api.auth import CallerDep
from gpuyard.api.authz import visible_tenants
from gpuyard.api.deps import ControllerDep
from gpuyard.api.schemas import error_responses
from gpuyard.api.schemas.usage import UsageDaily, UsageOut
from gpuyard.api.services.usage import UsageBy, parse_window, usage_daily, usage_report
from gpuyard.store import UserRecord

router = APIRouter(prefix="/api/v1/usage", tags=["usage"], responses=error_responses(401, 422))

Since = Annotated[str | None, Query(description="7d, 2h or an ISO time (default: 30 days ago)")]
Until = Annotated[str | None, Query(description="7d, 2h or an ISO time (default: now)")]


@router.get("", response_model=UsageOut)
def get_usage(
    ctl: ControllerDep,
    caller: CallerDep,
    by: UsageBy = UsageBy.tenant,
    since: Since = None,
    until: Until = None,
    tenant: Annotated[str | None, Query(description="only this tenant")] = None,
) -> UsageOut:
    """Usage in [since, until), cut at whole UTC hours, grouped by tenant, user or job."""
    window = parse_window(since, until, ctl.clock.now())
    return usage_report(ctl, _tenants(caller, tenant), by, window)


@router.get("/daily", response_model=UsageDaily)
def get_usage_daily(
    ctl: ControllerDep, caller: CallerDep, since: Since = None, until: Until = None
) -> UsageDaily:
    """GPU-hours per tenant per UTC day, and the average wait of the jobs started each day."""
    window = parse_window(since, until, ctl.clock.now())
    return usage_daily(ctl, visible_tenants(caller), window)


def _tenants(caller: UserRecord, tenant: str | None) -> frozenset[str] | None:
    """The tenants whose usage to show: the visible ones, or just `tenant` if visible."""
    visible = visible_tenants(caller)
    if tenant is None:
        return visible
    return frozenset({tenant}) if visible is None or tenant in visible else frozenset()
