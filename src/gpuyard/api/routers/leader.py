"""GET /api/v1/leader (platform admins): which server leads and its term (docs/ha.md). The
server ids and addresses are the platform's inside, so members do not see them."""

from __future__ import annotations

from fastapi import APIRouter, Request

from gpuyard.api.auth import CallerDep
from gpuyard.api.authz import authorize_platform_admin
from gpuyard.api.schemas import error_responses
from gpuyard.api.schemas.leader import LeadershipOut
from gpuyard.api.services.leader import leadership_out

router = APIRouter(prefix="/api/v1/leader", tags=["servers"], responses=error_responses(401))


@router.get("", response_model=LeadershipOut, responses=error_responses(403))
def get_leader(request: Request, caller: CallerDep) -> LeadershipOut:
    """The leading server, its term and heartbeat's age, and this server's role."""
    authorize_platform_admin(caller, "see which server leads")
    return leadership_out(getattr(request.app.state, "leadership", None))
