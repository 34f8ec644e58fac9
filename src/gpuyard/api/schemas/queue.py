"""The queue view's bodies: per tenant its GPUs (guaranteed, used, borrowed, lent) per flavor
and its queued jobs in queue order, plus the cluster's capacity per flavor."""

from __future__ import annotations

from gpuyard.api.schemas.common import Out


class FlavorShare(Out):
    """One tenant's GPUs of one flavor (see docs/api.md for how `lent` is counted)."""

    flavor: str
    guaranteed: int
    used: int  # held by the tenant's scheduled and running jobs
    borrowed: int  # used beyond the guarantee
    lent: int  # of its unused guarantee, what borrowers of other tenants occupy
    borrowing_limit: int | None
    lending_limit: int | None


class QueuedJob(Out):
    id: str
    name: str
    owner: str | None
    gpus: int
    priority: int
    pending_code: str | None
    pending_reason: str | None
    position: int | None
    queue_length: int | None
    estimated_start: str | None
    estimated_start_basis: str | None = None  # what the estimate rests on
    preemptions: int = 0
    submitted_at: str | None


class TenantQueue(Out):
    name: str
    weight: float
    queue_policy: str
    flavors: list[FlavorShare]
    queue: list[QueuedJob]


class FlavorCapacity(Out):
    flavor: str
    capacity: int  # healthy GPUs on schedulable nodes
    allocated: int  # of those, held by tasks


class QueueOut(Out):
    cluster: list[FlavorCapacity]
    tenants: list[TenantQueue]
