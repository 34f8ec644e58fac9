"""The queue endpoint: per tenant its GPUs (guaranteed, used, borrowed, lent) and its queued
jobs in queue order; a caller sees the tenants they have a role in (a platform admin all)."""

from __future__ import annotations

from fastapi import APIRouter

from gpuyard.api.auth import CallerDep
from gpuyard.api.authz import visible_tenants
from gpuyard.api.deps import ControllerDep
from gpuyard.api.schemas import QueueOut, error_responses
from gpuyard.api.services.queue import queue_view

router = APIRouter(prefix="/api/v1/queue", tags=["queue"], responses=error_responses(401))


@router.get("", response_model=QueueOut)
def get_queue(ctl: ControllerDep, caller: CallerDep) -> QueueOut:
    """Each visible tenant's GPUs per flavor and its queue, plus the cluster's capacity."""
    return queue_view(ctl, visible_tenants(caller))
