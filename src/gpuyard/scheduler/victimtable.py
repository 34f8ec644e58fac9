"""The running jobs that some head may preempt, as rows of what `preempt.candidates` reads,
kept across cycles from the view's changes.

Preemptible jobs that are borrowing (opportunistic, or of the `opportunistic` class: any
other job may stop those), stopping (terminating), or of a tenant
whose own jobs may be stopped (`same_tenant`: priority preemption, LAS demotion inside the
tenant). A row is worked out once per `RunningJob` object; the table follows the view's
changes (`ViewChanges`: started, replaced, stopped) when they follow the last view, and is
built again from `running` otherwise. Rows keep the order of `running` (each job its place
as first seen while it runs: the controller's and the simulator's lists keep a running job
in its place), which breaks ties in the candidates' order.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuyard.model import RunningJob
from gpuyard.scheduler.view import ViewChanges

# what `candidates` reads of a running job: (job, tenant, standing (class, then priority:
# `model.standing`), opportunistic, terminating, start, GPUs, attained GPU-seconds of
# earlier attempts)
Row = tuple[RunningJob, str, int, bool, bool, float, int, float]


class VictimTable:
    def __init__(self) -> None:
        self._rows: dict[str, Row] = {}  # job id → row, in `running` order once sorted
        self._place: dict[str, int] = {}  # every running job id → its place in `running`
        self._next = 0
        self._sorted = True
        self._same: frozenset[str] = frozenset()
        self._pending: Sequence[RunningJob] | None = ()  # `running` to build from, lazily

    def sync(
        self,
        running: Sequence[RunningJob],
        changes: ViewChanges | None,
        same_tenant: frozenset[str],
    ) -> None:
        """Bring the table in line with `running` (from `changes` when they follow the last
        view and the tenants' rules are the same; else it is built from `running` when first
        read)."""
        if changes is None or same_tenant != self._same or self._pending is not None:
            self._same, self._pending = same_tenant, running
            return
        for job_id in changes.stopped:
            self._rows.pop(job_id, None)
            self._place.pop(job_id, None)
        for r in changes.started:
            self._add(r)
        if len(self._place) != len(running):  # the changes do not add up: build again
            self._pending = running

    def rows(self) -> list[Row]:
        """The rows, in `running` order."""
        if self._pending is not None:
            running, self._pending = self._pending, None
            self._rows, self._place, self._sorted = {}, {}, True
            for r in running:
                self._add(r)
        if not self._sorted:
            place = self._place
            self._rows = dict(sorted(self._rows.items(), key=lambda item: place[item[0]]))
            self._sorted = True
        return list(self._rows.values())

    def _add(self, r: RunningJob) -> None:
        place = self._place.get(r.job_id)
        if place is None:
            place = self._place[r.job_id] = self._next
            self._next += 1
        if not self._wanted(r):
            self._rows.pop(r.job_id, None)
            return
        if r.job_id not in self._rows and self._rows:
            last = next(reversed(self._rows))
            self._sorted = self._sorted and self._place[last] < place
        self._rows[r.job_id] = _row(r)

    def _wanted(self, r: RunningJob) -> bool:
        return r.preemptible and (
            r.terminating or r.tenant in self._same or r.opportunistic or r.opportunistic_class
        )


def _row(r: RunningJob) -> Row:
    return (
        r,
        r.tenant,
        r.standing,
        r.opportunistic,
        r.terminating,
        r.started_at,
        r.gpus,
        r.attained_gpu_s,
    )
