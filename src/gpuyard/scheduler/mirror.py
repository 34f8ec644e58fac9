"""The scheduler's copy of the queue, kept from one cycle to the next: which demands joined
and which left since the last view.

With `ClusterView.changes` that follow the last view seen, the difference is read from the
changes (cost of the changes, not of the queue). Otherwise — the controller, a first view, a
view that skipped a number, or changes that do not add up to `queued` — the whole queue is
compared by object identity (C loops; old demands stay alive in `_by_id` meanwhile, so an
id cannot be reused by a new object during the comparison).
"""

from __future__ import annotations

from collections.abc import Collection
from operator import attrgetter

from gpuyard.model import JobDemand
from gpuyard.scheduler.view import ClusterView

_job_id = attrgetter("job_id")


class QueueMirror:
    def __init__(self) -> None:
        self.jobs: dict[str, JobDemand] = {}  # job id → its queued demand
        self._by_id: dict[int, JobDemand] | None = {}  # None once changes were applied
        self._number: int | None = None  # the last view's number, when changes may follow

    def sync(self, view: ClusterView) -> tuple[list[JobDemand], list[JobDemand]]:
        """Bring the copy in line with `view.queued`; returns (gone, added) demands."""
        changes = view.changes
        diff = None
        if changes is not None and changes.since == self._number:
            diff = self._apply(changes.left, changes.joined, len(view.queued))
        self._number = view.number if changes is not None else None
        return diff if diff is not None else self._compare(view.queued)

    def _apply(
        self, left: Collection[str], joined: tuple[JobDemand, ...], size: int
    ) -> tuple[list[JobDemand], list[JobDemand]] | None:
        jobs = self.jobs
        gone = [jobs[j] for j in left if j in jobs]
        stays = len(jobs) - len(gone)
        fresh = {d.job_id for d in joined}
        if len(fresh) != len(joined) or stays + len(joined) != size:
            return None
        if any(j in jobs and j not in left for j in fresh):
            return None
        for job in gone:
            del jobs[job.job_id]
        for job in joined:
            jobs[job.job_id] = job
        self._by_id = None
        return gone, list(joined)

    def _compare(self, queued: Collection[JobDemand]) -> tuple[list[JobDemand], list[JobDemand]]:
        old = self._by_id
        if old is None:
            old = dict(zip(map(id, self.jobs.values()), self.jobs.values(), strict=True))
        by_id = dict(zip(map(id, queued), queued, strict=True))
        added = [by_id[i] for i in by_id.keys() - old.keys()]
        gone = [old[i] for i in old.keys() - by_id.keys()]
        self._by_id = by_id
        self.jobs = dict(zip(map(_job_id, queued), queued, strict=True))
        return gone, added
