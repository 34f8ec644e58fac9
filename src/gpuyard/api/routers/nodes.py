"""Node endpoints."""

from __future__ import annotations

from fastapi import APIRouter

from gpuyard.api.deps import ControllerDep
from gpuyard.api.schemas import NodeList
from gpuyard.api.services.nodes import node_list

router = APIRouter(prefix="/api/v1/nodes", tags=["nodes"])


@router.get("", response_model=NodeList)
def list_nodes(ctl: ControllerDep) -> NodeList:
    return node_list(ctl)
