"""The pending reasons of a multi-tenant cycle, built when read.

With ten thousand queued jobs, writing a sentence for each one every cycle would cost more
than the cycle itself, and most are the same "behind the head" story. `PendingReasons` is an
immutable mapping job id → `PendingReason` over the cycle's outcome that builds (and keeps) a
job's reason when it is first read.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from gpuyard.model import JobDemand
from gpuyard.scheduler.explain import behind, placed_in_queue
from gpuyard.scheduler.order import Entry
from gpuyard.scheduler.reasons import PendingReason


class PendingReasons(Mapping[str, PendingReason]):
    def __init__(
        self,
        queues: Mapping[str, list[Entry]],
        jobs: Mapping[str, JobDemand],
        admitted: set[str],
        own: Mapping[str, PendingReason],
        blocked: Mapping[str, PendingReason],
        heads: Mapping[str, str | None],
    ) -> None:
        self._queues = {t: list(q) for t, q in queues.items()}
        self._jobs, self._admitted = jobs, admitted
        self._own, self._blocked, self._heads = own, blocked, heads
        self._waiting: dict[str, list[str]] | None = None
        self._position: dict[str, int] = {}
        self._built: dict[str, PendingReason] = {}
        self._behind: dict[str, PendingReason] = {}  # each tenant's shared story, built once

    def _index(self) -> dict[str, list[str]]:
        if self._waiting is None:
            self._waiting = {}
            for tenant, queue in self._queues.items():
                waiting = [job_id for _, job_id in queue if job_id not in self._admitted]
                self._waiting[tenant] = waiting
                for position, job_id in enumerate(waiting, 1):
                    self._position[job_id] = position
        return self._waiting

    def __getitem__(self, job_id: str) -> PendingReason:
        built = self._built.get(job_id)
        if built is not None:
            return built
        self._index()
        if job_id not in self._position:
            raise KeyError(job_id)
        tenant = self._jobs[job_id].tenant
        reason = self._own.get(job_id) or self._shared(tenant)
        waiting = self._index()[tenant]
        built = placed_in_queue(reason, self._position[job_id], len(waiting), tenant)
        self._built[job_id] = built
        return built

    def _shared(self, tenant: str) -> PendingReason:
        shared = self._behind.get(tenant)
        if shared is None:
            head_reason = self._blocked[tenant]
            head_id = self._heads.get(tenant)
            # None: the tenant's budget holds every job
            shared = head_reason if head_id is None else behind(self._jobs[head_id], head_reason)
            self._behind[tenant] = shared
        return shared

    def __iter__(self) -> Iterator[str]:
        for waiting in self._index().values():
            yield from waiting

    def __len__(self) -> int:
        return sum(len(w) for w in self._index().values())

    def __contains__(self, job_id: object) -> bool:
        self._index()
        return job_id in self._position

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self.items()) == dict(other.items())

    __hash__ = None  # type: ignore[assignment]
