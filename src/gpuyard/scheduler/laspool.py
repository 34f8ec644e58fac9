"""LAS's victim pool, kept across cycles from the view's changes and the queue crossings.

A running job's LAS queue (`las_thresholds_gpu_s`) only grows while it runs, at times known
when it starts (`crossing_times`). So the pool keeps every preemptible running job that is
not stopping with its queue, the jobs above the lowest queue in the victims' order, and a
heap of the crossings to come: a cycle moves only the jobs whose crossing has passed,
instead of working out the queue of every running job and sorting them all.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
from collections.abc import Sequence

from gpuyard.model import RunningJob
from gpuyard.scheduler.remaining import KeptPool


def crossing_times(r: RunningJob, thresholds: Sequence[float]) -> tuple[float, ...]:
    """When `r`'s attained GPU-seconds reach each threshold (−inf: before this attempt,
    inf: never, it holds no whole GPU)."""
    gpus = r.gpus
    return tuple(
        -math.inf
        if r.attained_gpu_s >= t
        else (r.started_at + (t - r.attained_gpu_s) / gpus if gpus else math.inf)
        for t in thresholds
    )


class LevelPool(KeptPool):
    """LAS's victims: preemptible running jobs that are not stopping, in a queue above the
    lowest at the time asked, highest queue first, newest (latest start) first there, then
    in `running` order. Times asked never go back."""

    def __init__(self, thresholds: Sequence[float]) -> None:
        super().__init__()
        self.thresholds = tuple(thresholds)
        self.level: dict[str, int] = {}  # job id → its queue, of the jobs watched
        self.jobs: dict[str, RunningJob] = {}  # the jobs watched (preemptible, not stopping)
        self._entries: list[tuple[int, float, int, str]] = []  # (−queue, −start, order, id)
        self._times: dict[str, tuple[float, ...]] = {}
        self._crossings: list[tuple[float, int, str, RunningJob]] = []  # heap, stale kept
        self._pushes = itertools.count()

    def _clear(self) -> None:
        self.level, self.jobs, self._times = {}, {}, {}
        self._entries, self._crossings = [], []

    def victims(self, now: float) -> list[RunningJob]:
        """The jobs above the lowest queue at `now`, in the victims' order."""
        self._advance(now)
        return [self.jobs[e[3]] for e in self._entries]

    def next_crossing(self, now: float) -> float:
        """The first time after `now` that a watched job moves up a queue (inf: none will)."""
        self._advance(now)
        heap = self._crossings
        while heap and self.jobs.get(heap[0][2]) is not heap[0][3]:
            heapq.heappop(heap)
        return heap[0][0] if heap else math.inf

    def _add(self, r: RunningJob) -> None:
        self._place_of(r.job_id)
        if not r.preemptible or r.terminating:
            return
        now = self.now
        times = self._times[r.job_id] = crossing_times(r, self.thresholds)
        self.jobs[r.job_id] = r
        self._place(r, bisect.bisect_right(times, now))
        for t in times:
            if now < t < math.inf:
                heapq.heappush(self._crossings, (t, next(self._pushes), r.job_id, r))

    def _drop(self, job_id: str) -> None:
        r = self.jobs.pop(job_id, None)
        if r is not None:
            self._unplace(r)
            del self.level[job_id], self._times[job_id]

    def _advance(self, now: float) -> None:
        """Move up the jobs whose crossing has passed by `now`."""
        heap = self._crossings
        while heap and heap[0][0] <= now:
            _, _, job_id, r = heapq.heappop(heap)
            if self.jobs.get(job_id) is r:
                self._unplace(r)
                self._place(r, bisect.bisect_right(self._times[job_id], now))

    def _place(self, r: RunningJob, level: int) -> None:
        self.level[r.job_id] = level
        if level:
            bisect.insort(self._entries, self._entry(r, level))

    def _unplace(self, r: RunningJob) -> None:
        level = self.level.get(r.job_id, 0)
        if level:
            entries = self._entries
            del entries[bisect.bisect_left(entries, self._entry(r, level))]

    def _entry(self, r: RunningJob, level: int) -> tuple[int, float, int, str]:
        return (-level, -r.started_at, self._order[r.job_id], r.job_id)
