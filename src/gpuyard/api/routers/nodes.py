"""Node endpoints: any logged-in user may list nodes (GPUs of jobs they cannot see show as
busy, without the job's id)."""

from __future__ import annotations

from fastapi import APIRouter

from gpuyard.api.auth import CallerDep
from gpuyard.api.authz import visible_tenants
from gpuyard.api.deps import ControllerDep
from gpuyard.api.schemas import ErrorOut, NodeList
from gpuyard.api.services.nodes import node_list

router = APIRouter(prefix="/api/v1/nodes", tags=["nodes"], responses={401: {"model": ErrorOut}})


@router.get("", response_model=NodeList)
def list_nodes(ctl: ControllerDep, caller: CallerDep) -> NodeList:
    return node_list(ctl, visible_tenants(caller))
