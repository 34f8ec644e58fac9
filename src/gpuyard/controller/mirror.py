"""The live jobs in memory: what the controller reads each cycle, kept by reading only what
changed.

The first read loads every live job (queued, scheduled, running) at the jobs' revision read
just before; each later one reads the rows changed since the newest revision seen
(store/revisions.py: numbers become visible in the order they are given, so nothing is
missed). A queue of 10,000 that did not change costs one indexed query that returns nothing,
where reading it costs seconds of parsing. A job that ends leaves the mirror.

What the revisions do not count is not trusted here: the pending reasons (the mirror keeps
the ones last written or read, `pending_to_write`) and a session's pings (read from the store
by who needs them).

One thread (the controller's) uses a mirror.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpuyard.model import JobState
from gpuyard.scheduler import without_place
from gpuyard.store import JobRecord, JobRepo, Pending, pending_differs

LIVE = (JobState.QUEUED, JobState.SCHEDULED, JobState.RUNNING)


class JobMirror:
    def __init__(self, jobs: JobRepo) -> None:
        self._repo = jobs
        self.rev: int | None = None  # the newest revision read (None: not loaded yet)
        self._live: dict[str, JobRecord] = {}
        self._pending: dict[str, Pending | None] = {}  # as last written or read
        self._lists: dict[tuple[JobState, ...], list[JobRecord]] = {}  # in_states' answers
        self._stopping: set[str] = set()  # live jobs a stop was asked for

    def refresh(self) -> bool:
        """Read what changed since the last refresh; whether anything did."""
        if self.rev is None:
            self.rev = self._repo.revision()  # before the rows: what commits after is read next
            changed = self._repo.changed_since(-1, LIVE)
        else:
            changed = self._repo.changed_since(self.rev)
        for job in changed:
            self.rev = max(self.rev, job.rev)
            self._stopping.discard(job.id)
            if job.state in LIVE:
                self._live[job.id] = job
                self._pending[job.id] = job.pending
                if job.stop_requested is not None:
                    self._stopping.add(job.id)
            else:
                self._live.pop(job.id, None)
                self._pending.pop(job.id, None)
        if changed:
            self._lists.clear()
        return bool(changed)

    def in_states(self, *states: JobState) -> Sequence[JobRecord]:
        """The live jobs in these states, oldest first, as of now (refreshed; the same list
        until something changes: not to be changed by the caller)."""
        self.refresh()
        key = tuple(sorted(states))
        jobs = self._lists.get(key)
        if jobs is None:
            wanted = set(states)
            jobs = sorted((j for j in self._live.values() if j.state in wanted), key=_seq)
            self._lists[key] = jobs
        return jobs

    def stop_requested(self) -> list[JobRecord]:
        """The live jobs a stop was asked for, oldest first."""
        self.refresh()
        return sorted((self._live[i] for i in self._stopping), key=_seq)

    def pending_to_write(self, reasons: Mapping[str, Pending]) -> dict[str, Pending]:
        """The reasons of live jobs that differ from the ones last written or read by more
        than the store's slack (`pending_differs`), their sentences compared without the
        place in the queue they end with (the place is compared, with its own slack)."""
        out = {}
        for job_id, p in reasons.items():
            job = self._live.get(job_id)
            if job is None:
                continue
            stored = self._pending.get(job_id)
            if stored is None or (stored != p and _differs(stored, p, job.tenant)):
                out[job_id] = p
        return out

    def wrote_pending(self, reasons: Mapping[str, Pending]) -> None:
        """These reasons were written (to the jobs still queued: the others left the mirror
        or will at the next refresh)."""
        self._pending.update(reasons)


def _differs(stored: Pending, p: Pending, tenant: str) -> bool:
    if stored.message != p.message:
        bare = without_place(stored.message, stored.position, stored.queue_length, tenant)
        if bare != without_place(p.message, p.position, p.queue_length, tenant):
            return True
    return pending_differs(stored, p, messages=False)


def _seq(job: JobRecord) -> int:
    return job.seq
