"""The scheduler's copy of the queue, kept from one cycle to the next: which demands joined
and which left since the last view (and `Numbering`: whether a view's changes follow the last
view seen).

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
from gpuyard.scheduler.view import ClusterView, ViewChanges

_job_id = attrgetter("job_id")


class Numbering:
    """Whether a view's changes follow the last view this scheduler synced."""

    def __init__(self) -> None:
        self._last: int | None = None

    def follow(self, view: ClusterView) -> ViewChanges | None:
        changes = view.changes
        follows = changes is not None and changes.since == self._last
        self._last = view.number if changes is not None else None
        return changes if follows else None


class QueueMirror:
    def __init__(self) -> None:
        self.jobs: dict[str, JobDemand] = {}  # job id → its queued demand
        self._by_id: dict[int, JobDemand] | None = {}  # None once changes were applied

    def sync(
        self, queued: Collection[JobDemand], changes: ViewChanges | None
    ) -> tuple[list[JobDemand], list[JobDemand]]:
        """Bring the copy in line with `queued` (from `changes` when they follow the last
        view); returns (gone, added) demands."""
        diff = None
        if changes is not None:
            diff = self._apply(changes.left, changes.joined, len(queued))
        return diff if diff is not None else self._compare(queued)

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
