"""Job array bodies (camelCase JSON): a parent's summary and its children, from store records."""

from __future__ import annotations

from gpuyard.api.schemas.common import Out, iso
from gpuyard.store import ArrayChild, ArrayRecord


class ArrayChildOut(Out):
    id: str
    index: int
    state: str
    reason: str | None
    started_at: str | None
    finished_at: str | None


class ArraySummary(Out):
    id: str
    name: str
    tenant: str
    owner: str | None
    state: str  # a summary of the children's (docs/controller.md, Job arrays)
    expression: str  # as submitted: 0-49%8
    size: int
    max_running: int | None  # %N; null: no limit
    running: int  # children scheduled or running now
    counts: dict[str, int]  # children by state
    submitted_at: str | None
    stop_requested: str | None


class ArrayDetail(ArraySummary):
    children: list[ArrayChildOut]


class ArrayCancelled(Out):
    id: str
    state: str
    cancelled: int  # children asked to stop (those not ended)


def array_summary(a: ArrayRecord) -> ArraySummary:
    return ArraySummary(
        id=a.id,
        name=a.name,
        tenant=a.tenant,
        owner=a.owner,
        state=str(a.state),
        expression=a.expression,
        size=a.size,
        max_running=a.max_running,
        running=a.running,
        counts={str(st): n for st, n in sorted(a.counts.items())},
        submitted_at=iso(a.submitted_at),
        stop_requested=a.stop_requested,
    )


def array_child(c: ArrayChild) -> ArrayChildOut:
    return ArrayChildOut(
        id=c.id,
        index=c.index,
        state=str(c.state),
        reason=c.reason,
        started_at=iso(c.started_at),
        finished_at=iso(c.finished_at),
    )
