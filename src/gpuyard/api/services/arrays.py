"""What the job array endpoints do: show a parent with its children, cancel them together,
and the arrays a page of jobs belongs to (routers stay thin; authorisation is theirs)."""

from __future__ import annotations

from collections.abc import Sequence

from gpuyard.api.schemas.arrays import (
    ArrayCancelled,
    ArrayDetail,
    ArraySummary,
    array_child,
    array_summary,
)
from gpuyard.api.schemas.jobs import JobSummary
from gpuyard.controller import Controller
from gpuyard.store import ArrayRecord, JobNotFound


def get_array(ctl: Controller, array_id: str) -> ArrayRecord:
    array = ctl.store.arrays.get(array_id)
    if array is None:
        raise JobNotFound(array_id)
    return array


def array_detail(ctl: Controller, array: ArrayRecord) -> ArrayDetail:
    children = [array_child(c) for c in ctl.store.arrays.children(array.id)]
    return ArrayDetail(**array_summary(array).model_dump(), children=children)


def cancel_array(ctl: Controller, array: ArrayRecord, by: str) -> ArrayCancelled:
    """Ask the controller to stop every child not ended (one transaction)."""
    n = ctl.store.arrays.cancel(array.id)
    ctl.wake()
    after = get_array(ctl, array.id)
    return ArrayCancelled(id=array.id, state=str(after.state), cancelled=n)


def page_arrays(ctl: Controller, jobs: Sequence[JobSummary]) -> list[ArraySummary]:
    """The arrays whose children are among `jobs` (the caller sees those: same tenant)."""
    ids = list(dict.fromkeys(j.array_id for j in jobs if j.array_id))
    found = ctl.store.arrays.many(ids)
    return [array_summary(found[i]) for i in ids if i in found]
