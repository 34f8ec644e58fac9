"""Guaranteed quotas, borrowing and lending: who uses how much of what, and may a job start.

Resources are keyed by name: a GPU flavor (the GPU type as nodes report it, matched to a
tenant's `FlavorQuota` without regard to case), `CPU` and `MEMORY`. A tenant's guarantee of a
flavor without a quota entry is 0; its CPU or memory guarantee is None when the tenant sets
none, and then that resource is not quota-managed for it (never borrowed, never reserved).

Cohort = all tenants. A job whose usage stays within its tenant's guarantee is *guaranteed*.
Beyond it, the excess is *borrowed*: allowed up to the tenant's `borrowing_limit`, and only
out of free capacity that is not reserved for another tenant — a lender's unused guarantee
beyond its `lending_limit` is reserved for it. With no tenants configured at all the book is
disabled: every job is guaranteed and nothing is borrowed (the v1 plain cluster).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gpuyard.model import FlavorQuota, JobDemand, Tenant
from gpuyard.scheduler.reasons import PendingCode
from gpuyard.scheduler.snapshot import Undo

CPU = "cpu"
MEMORY = "memory"
Usage = dict[str, int]


@dataclass(frozen=True, slots=True)
class QuotaVerdict:
    """May the job start as far as quotas go, and what it borrows if it does."""

    borrowed: tuple[tuple[str, int], ...] = ()
    blocked: PendingCode | None = None
    message: str = ""

    @property
    def opportunistic(self) -> bool:
        return bool(self.borrowed)


def job_usage(job: JobDemand, flavor: str | None) -> Usage:
    total = job.total
    usage = {CPU: total.cpu_milli, MEMORY: total.memory_mb}
    if total.gpus and flavor:
        usage[flavor] = total.gpus
    return usage


def unit(key: str, amount: int) -> str:
    if key == CPU:
        return f"{amount / 1000:g} CPUs"
    if key == MEMORY:
        return f"{amount} MB of memory"
    return f"{amount} {key} GPUs"


class QuotaBook:
    """Usage per tenant and resource, charged and refunded with the snapshot."""

    def __init__(self, tenants: Mapping[str, Tenant], capacity: Mapping[str, int]) -> None:
        self.enabled = bool(tenants)
        self.tenants = tenants
        self.capacity = dict(capacity)
        self.used: dict[str, Usage] = {}
        self._quotas = {
            name: {q.flavor.upper(): q for q in t.quotas} for name, t in tenants.items()
        }
        self._lenders = [
            name
            for name, t in tenants.items()
            if any(q.lending_limit is not None for q in t.quotas)
        ]

    def charge(self, tenant: str, usage: Usage) -> Undo:
        self._add(tenant, usage, +1)
        return lambda: self._add(tenant, usage, -1)

    def refund(self, tenant: str, usage: Usage) -> Undo:
        self._add(tenant, usage, -1)
        return lambda: self._add(tenant, usage, +1)

    def _add(self, tenant: str, usage: Usage, sign: int) -> None:
        used = self.used.setdefault(tenant, {})
        for key, amount in usage.items():
            used[key] = used.get(key, 0) + sign * amount

    def quota(self, tenant: str, key: str) -> FlavorQuota | None:
        return self._quotas.get(tenant, {}).get(key.upper())

    def guarantee(self, tenant: str, key: str) -> int | None:
        """Guaranteed amount of `key` for `tenant`; None when `key` is not quota-managed."""
        if not self.enabled:
            return None
        if key in (CPU, MEMORY):
            t = self.tenants.get(tenant)
            return None if t is None else (t.cpu_milli if key == CPU else t.memory_mb)
        q = self.quota(tenant, key)
        return q.guaranteed if q else 0

    def usage(self, tenant: str, key: str) -> int:
        return self.used.get(tenant, {}).get(key, 0)

    def borrowing(self, tenant: str, key: str) -> int:
        """How much of `key` the tenant uses beyond its guarantee now."""
        guaranteed = self.guarantee(tenant, key)
        return 0 if guaranteed is None else max(0, self.usage(tenant, key) - guaranteed)

    def reserved(self, tenant: str, key: str) -> int:
        """Unused guarantee of `tenant` that it does not lend (0 without a lending limit)."""
        q = self.quota(tenant, key)
        if q is None or q.lending_limit is None:
            return 0
        unused = max(0, q.guaranteed - self.usage(tenant, key))
        return max(0, unused - q.lending_limit)

    def verdict(self, tenant: str, usage: Usage, free: Callable[[str], int]) -> QuotaVerdict:
        """Would `usage` more for `tenant` be guaranteed, borrowed, or refused by quota."""
        borrowed: list[tuple[str, int]] = []
        for key, amount in usage.items():
            guaranteed = self.guarantee(tenant, key)
            if guaranteed is None or amount == 0:
                continue
            before = self.usage(tenant, key)
            extra = max(0, before + amount - guaranteed) - max(0, before - guaranteed)
            if extra == 0:
                continue
            refusal = self._refusal(tenant, key, amount, before + amount - guaranteed, free(key))
            if refusal is not None:
                return refusal
            borrowed.append((key, extra))
        return QuotaVerdict(tuple(borrowed))

    def _refusal(
        self, tenant: str, key: str, amount: int, beyond: int, free: int
    ) -> QuotaVerdict | None:
        q = self.quota(tenant, key)
        if q is not None and q.borrowing_limit is not None and beyond > q.borrowing_limit:
            return QuotaVerdict(
                blocked=PendingCode.BORROWING_LIMIT,
                message=(
                    f"tenant {tenant} would use {unit(key, beyond)} beyond its guarantee of "
                    f"{q.guaranteed}; its borrowing limit is {q.borrowing_limit}"
                ),
            )
        holders = [(o, self.reserved(o, key)) for o in self._lenders if o != tenant]
        holders = [(o, n) for o, n in holders if n > 0]
        if holders and amount > free - sum(n for _, n in holders):
            names = ", ".join(f"{o} ({n})" for o, n in holders)
            return QuotaVerdict(
                blocked=PendingCode.QUOTA_EXCEEDED,
                message=(
                    f"needs {unit(key, amount)} beyond tenant {tenant}'s guarantee; "
                    f"the free ones are guaranteed to tenants that do not lend them: {names}"
                ),
            )
        return None

    def max_allowed(self, tenant: str, key: str) -> int | None:
        """The most GPUs of flavor `key` a tenant may ever use: guarantee + borrowing limit;
        None when it may borrow without limit."""
        q = self.quota(tenant, key)
        if not self.enabled or q is None or q.borrowing_limit is None:
            return None
        return q.guaranteed + q.borrowing_limit

    def share_key(self, tenant: str) -> tuple[int, float]:
        """Weighted dominant share: (0, used/guaranteed) while within every guarantee,
        (1, borrowed/capacity) once borrowing anything; lower goes first."""
        weight = self.tenants[tenant].weight if tenant in self.tenants else 1.0
        within, borrowed = 0.0, 0.0
        for key, used in self.used.get(tenant, {}).items():
            guaranteed = self.guarantee(tenant, key)
            if guaranteed is None or used <= 0:
                continue
            if used > guaranteed:
                borrowed = max(borrowed, (used - guaranteed) / max(1, self.capacity.get(key, 1)))
            else:
                within = max(within, used / guaranteed)
        weight = weight if weight > 0 else 1e-9
        return (1, borrowed / weight) if borrowed else (0, within / weight)
