"""SRTF's victim pool, kept sorted across cycles from the view's changes (`KeptPool`, which
LAS's pool shares)."""

from __future__ import annotations

import bisect
import math
from abc import ABC, abstractmethod
from collections.abc import Collection

from gpuyard.model import RunningJob
from gpuyard.scheduler.view import ViewChanges


class KeptPool(ABC):
    """Running jobs kept across cycles: synced from the view's changes when they follow the
    last view, else rebuilt from `running`; each job id keeps its place in `running` (the
    order it was first seen in) while it runs, for ties."""

    def __init__(self) -> None:
        self._order: dict[str, int] = {}  # every running job id → its place in `running`
        self._next = 0
        self.now = -math.inf  # the time of the last sync

    def sync(
        self, running: Collection[RunningJob], changes: ViewChanges | None, now: float
    ) -> None:
        """Bring the pool in line with `running` at the view's time `now`."""
        self.now = now
        if changes is not None:
            for job_id in changes.stopped:
                self._drop(job_id)
                self._order.pop(job_id, None)
            for r in changes.started:
                self._drop(r.job_id)
                self._add(r)
            if len(self._order) == len(running):
                return
        self._clear()
        self._order = {}
        for r in running:
            self._add(r)

    def _place_of(self, job_id: str) -> int:
        order = self._order.get(job_id)
        if order is None:
            order = self._order[job_id] = self._next
            self._next += 1
        return order

    @abstractmethod
    def _add(self, r: RunningJob) -> None: ...

    @abstractmethod
    def _drop(self, job_id: str) -> None: ...

    @abstractmethod
    def _clear(self) -> None: ...


class RemainingPool(KeptPool):
    """SRTF's victims kept sorted across cycles: preemptible running jobs that are not
    stopping, latest oracle end first (the most time left), then in `running` order."""

    def __init__(self) -> None:
        super().__init__()
        self.entries: list[tuple[float, int, str]] = []  # (−end, order, job id), sorted
        self.jobs: dict[str, RunningJob] = {}  # job id → RunningJob, of the entries

    def __len__(self) -> int:
        return len(self.entries)

    def _clear(self) -> None:
        self.entries, self.jobs = [], {}

    def _add(self, r: RunningJob) -> None:
        order = self._place_of(r.job_id)
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
