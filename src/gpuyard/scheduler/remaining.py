"""SRTF's victim pool, kept sorted across cycles from the view's changes."""

from __future__ import annotations

import bisect
import math
from collections.abc import Collection

from gpuyard.model import RunningJob
from gpuyard.scheduler.view import ViewChanges


class RemainingPool:
    """SRTF's victims kept sorted across cycles: preemptible running jobs that are not
    stopping, latest oracle end first (the most time left), then in `running` order. Synced
    from the view's changes when they follow the last view, else rebuilt from `running`."""

    def __init__(self) -> None:
        self.entries: list[tuple[float, int, str]] = []  # (−end, order, job id), sorted
        self.jobs: dict[str, RunningJob] = {}  # job id → RunningJob, of the entries
        self._order: dict[str, int] = {}  # every running job id → its place in `running`
        self._next = 0

    def __len__(self) -> int:
        return len(self.entries)

    def sync(self, running: Collection[RunningJob], changes: ViewChanges | None) -> None:
        if changes is not None:
            for job_id in changes.stopped:
                self._drop(job_id)
                self._order.pop(job_id, None)
            for r in changes.started:
                self._drop(r.job_id)
                self._add(r)
            if len(self._order) == len(running):
                return
        self.entries, self.jobs, self._order = [], {}, {}
        for r in running:
            self._add(r)

    def _add(self, r: RunningJob) -> None:
        order = self._order.get(r.job_id)
        if order is None:
            order = self._order[r.job_id] = self._next
            self._next += 1
        if r.preemptible and not r.terminating:
            end = math.inf if r.oracle_end_at is None else r.oracle_end_at
            bisect.insort(self.entries, (-end, order, r.job_id))
            self.jobs[r.job_id] = r

    def _drop(self, job_id: str) -> None:
        r = self.jobs.pop(job_id, None)
        if r is not None:
            end = math.inf if r.oracle_end_at is None else r.oracle_end_at
            entries = self.entries
            del entries[bisect.bisect_left(entries, (-end, self._order[job_id], job_id))]

    def longer_than(self, left_s: float, now: float) -> list[RunningJob]:
        """The jobs with more than `left_s` seconds left at `now`, most left first."""
        victims = []
        for neg_end, _, job_id in self.entries:
            if -neg_end - now <= left_s:
                break
            victims.append(self.jobs[job_id])
        return victims
