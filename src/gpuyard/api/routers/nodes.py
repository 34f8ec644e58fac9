"""Node endpoints: any logged-in user may list nodes (GPUs of jobs they cannot see show as
busy, without the job's id); only a platform admin cordons, drains or uncordons a node."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body

from gpuyard.api.auth import CallerDep
from gpuyard.api.authz import authorize_platform_admin, visible_tenants
from gpuyard.api.deps import ControllerDep
from gpuyard.api.schemas import CordonIn, NodeList, NodeOut, error_responses
from gpuyard.api.services.nodes import node_list, set_cordon
from gpuyard.model import CordonState

router = APIRouter(prefix="/api/v1/nodes", tags=["nodes"], responses=error_responses(401))

ADMIN_RESPONSES = error_responses(403, 404, 422)
CordonBody = Annotated[
    CordonIn | None,
    Body(examples=[{"reason": "replacing a fan", "deadline": "2h"}]),
]


@router.get("", response_model=NodeList)
def list_nodes(ctl: ControllerDep, caller: CallerDep) -> NodeList:
    return node_list(ctl, visible_tenants(caller))


def _changed(ctl: ControllerDep, name: str) -> NodeOut:
    """The node as listed after an admin's change (admins see every job)."""
    for node in node_list(ctl, None).nodes:
        if node.name == name:
            return node
    raise LookupError(f"node {name} is not part of the cluster now")


@router.post("/{name}/cordon", response_model=NodeOut, responses=ADMIN_RESPONSES)
def cordon_node(
    name: str, ctl: ControllerDep, caller: CallerDep, body: CordonBody = None
) -> NodeOut:
    """No new work on the node; what runs there goes on."""
    authorize_platform_admin(caller, "cordon nodes")
    set_cordon(ctl, name, CordonState.CORDONED, body or CordonIn(), caller.name)
    return _changed(ctl, name)


@router.post("/{name}/drain", response_model=NodeOut, responses=ADMIN_RESPONSES)
def drain_node(
    name: str, ctl: ControllerDep, caller: CallerDep, body: CordonBody = None
) -> NodeOut:
    """Cordon, and let running jobs finish; after `deadline` (if given) they are preempted
    (requeued, not counted as a retry) with their tenant's preemption grace."""
    authorize_platform_admin(caller, "drain nodes")
    set_cordon(ctl, name, CordonState.DRAINING, body or CordonIn(), caller.name)
    return _changed(ctl, name)


@router.post("/{name}/uncordon", response_model=NodeOut, responses=ADMIN_RESPONSES)
def uncordon_node(name: str, ctl: ControllerDep, caller: CallerDep) -> NodeOut:
    """Undo a cordon or a drain: the node takes new work again."""
    authorize_platform_admin(caller, "uncordon nodes")
    set_cordon(ctl, name, None, CordonIn(), caller.name)
    return _changed(ctl, name)
