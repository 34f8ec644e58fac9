"""When a scheduling cycle can be skipped: nothing it reads changed, and the scheduler said
that, on the same inputs, nothing would be decided before a time not yet come.

What a cycle reads (`Inputs`): the jobs (their revision: store/revisions.py), the nodes as
the scheduler sees them, the tenants and the active tasks. After a cycle that decided
nothing (no job admitted, none preempted), `Scheduler.quiet_until` says until when the same
inputs decide nothing either (the next aging, a running job crossing into a higher LAS
queue); a job waiting out a backoff wakes the cycle at its `not_before`. The simulator skips
the same cycles (sim/engine.py). A full cycle still runs every `MAX_QUIET_S`, so that pending
reasons' estimates follow the clock.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gpuyard.model import Node, Tenant
from gpuyard.store import JobRecord, TaskRecord

MAX_QUIET_S = 30.0


@dataclass(frozen=True)
class Inputs:
    """What a scheduling cycle reads, compared whole."""

    jobs_rev: int | None
    nodes: tuple[Node, ...]
    tenants: tuple[Tenant, ...]
    tasks: tuple[tuple[int, str, bool], ...]  # active tasks: id, state, stop sent


def inputs(
    jobs_rev: int | None,
    nodes: Sequence[Node],
    tenants: Iterable[Tenant],
    tasks: Iterable[TaskRecord],
) -> Inputs:
    return Inputs(
        jobs_rev,
        tuple(nodes),
        tuple(sorted(tenants, key=lambda t: t.name)),
        tuple((t.id, str(t.state), t.stop_sent) for t in tasks),
    )


class QuietCycles:
    def __init__(self) -> None:
        self._inputs: Inputs | None = None
        self._until = -math.inf
        self._full_at = -math.inf
        self.skipped = 0  # cycles skipped so far

    def skip(self, now: Inputs, at: float) -> bool:
        """Whether the cycle on `now`'s inputs, at time `at`, would decide nothing."""
        quiet = now == self._inputs and at < self._until and at - self._full_at < MAX_QUIET_S
        self.skipped += quiet
        return quiet

    def ran(
        self,
        read: Inputs,
        at: float,
        decided: bool,
        quiet_until: float,
        backing_off: Iterable[JobRecord],
    ) -> None:
        """A cycle ran on `read` at `at`: if it `decided` nothing, none is needed until
        `quiet_until` (the scheduler's word) or the first backoff that ends, whichever is
        first, while the inputs stay the same."""
        wakes = [j.not_before for j in backing_off if j.not_before is not None]
        self._inputs = read
        self._full_at = at
        self._until = at if decided else min([quiet_until, *wakes])
