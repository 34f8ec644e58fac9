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

An `opportunistic`-class job (`PriorityClass`) is charged to a book entry of its own,
`quota_tenant` ("a (opportunistic)"): a tenant with no guarantee and no limits. So it only
ever borrows idle capacity (lenders' reserved capacity excepted), is never within its
tenant's guarantee, and changes neither its tenant's share nor its borrowing.

GPU memory (docs/gpu-sharing.md): shared-GPU tasks are charged in MB of their flavor's GPU
memory under the key `gpu_memory_key(flavor)` (`A100-80GB/MB`). For a tenant with a GPU-memory
quota of that flavor (`FlavorQuota.gpu_memory_mb`) that key is quota-managed like a flavor:
guarantee, borrowing and lending in MB. For a tenant without one, a job's shared tasks are
charged ⌈their MB / one GPU's MB⌉ GPUs of the flavor instead (and the MB key is only recorded).
Usage built from a demand or a placement carries raw share keys; `QuotaBook.normalise` turns
them into what is charged, for one tenant.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gpuyard.model import FlavorQuota, JobDemand, Tenant
from gpuyard.scheduler.reasons import PendingCode
from gpuyard.scheduler.snapshot import Undo

CPU = "cpu"
MEMORY = "memory"
Usage = dict[str, int]
_MB, _RAW_MB, _RAW_MILLI = "/MB", "/share-MB", "/share-milli"


OPPORTUNISTIC_SUFFIX = " (opportunistic)"  # a tenant name has no space: no clash


def quota_tenant(tenant: str, opportunistic_class: bool) -> str:
    """Whom a job is charged to in the book: its tenant, or the tenant's opportunistic
    entry for an `opportunistic`-class job."""
    return tenant + OPPORTUNISTIC_SUFFIX if opportunistic_class else tenant


def gpu_memory_key(flavor: str) -> str:
    """The quota key of a flavor's GPU memory, in MB."""
    return flavor + _MB


def flavor_of_key(key: str) -> str:
    """`A100-80GB/MB` → `A100-80GB`; a flavor key as it is."""
    for suffix in (_MB, _RAW_MB, _RAW_MILLI):
        if key.endswith(suffix):
            return key[: -len(suffix)]
    return key


def is_gpu_memory_key(key: str) -> bool:
    return key.endswith(_MB)


@dataclass(frozen=True, slots=True, init=False)
class QuotaVerdict:
    """May the job start as far as quotas go, and what it borrows if it does."""

    borrowed: tuple[tuple[str, int], ...]
    blocked: PendingCode | None
    message: str

    def __init__(
        self,
        borrowed: tuple[tuple[str, int], ...] = (),
        blocked: PendingCode | None = None,
        message: str = "",
    ) -> None:  # by hand: compiled, it is built natively (docs/sim.md, Fast replays)
        object.__setattr__(self, "borrowed", borrowed)
        object.__setattr__(self, "blocked", blocked)
        object.__setattr__(self, "message", message)

    @property
    def opportunistic(self) -> bool:
        return bool(self.borrowed)


GUARANTEED = QuotaVerdict()  # the common verdict: within the guarantee, nothing borrowed


def job_usage(job: JobDemand, flavor: str | None) -> Usage:
    """What `job` would use on `flavor`, raw: shares as asked (normalise before charging)."""
    total = job.total
    usage = {CPU: total.cpu_milli, MEMORY: total.memory_mb}
    if total.gpus and flavor:
        usage[flavor] = total.gpus
    shares = [t.gpu_share for t in job.tasks if t.gpu_share is not None]
    if shares and flavor:
        usage[flavor + _RAW_MB] = sum(s.memory_mb for s in shares)
        usage[flavor + _RAW_MILLI] = sum(s.milli for s in shares)
    return usage


def placed_share(usage: Usage, flavor: str, memory_mb: int) -> None:
    """Add a placed shared task's `memory_mb` of `flavor` to raw `usage`."""
    usage[flavor + _RAW_MB] = usage.get(flavor + _RAW_MB, 0) + memory_mb


def unit(key: str, amount: int) -> str:
    if key == CPU:
        return f"{amount / 1000:g} CPUs"
    if key == MEMORY:
        return f"{amount} MB of memory"
    if is_gpu_memory_key(key):
        return f"{amount} MB of {flavor_of_key(key)} GPU memory"
    return f"{amount} {key} GPUs"


class QuotaBook:
    """Usage per tenant and resource, charged and refunded with the snapshot."""

    def __init__(
        self,
        tenants: Mapping[str, Tenant],
        capacity: Mapping[str, int],
        gpu_memory: Mapping[str, int] | None = None,
    ) -> None:
        self.enabled = bool(tenants)
        self.tenants = tenants
        self.capacity = dict(capacity)
        self.gpu_memory = dict(gpu_memory or {})  # flavor → MB of one GPU (the smallest)
        self.used: dict[str, Usage] = {}
        self._quotas = {name: _quota_keys(t) for name, t in tenants.items()}
        self._guarantees: dict[tuple[str, str], int | None] = {}
        self._lenders = [
            name
            for name, quotas in self._quotas.items()
            if any(q.lending_limit is not None for q in quotas.values())
        ]

    def normalise(self, tenant: str, usage: Usage) -> Usage:
        """Raw share keys → what `tenant` is charged: MB of the flavor's GPU memory, plus
        ⌈MB / one GPU's MB⌉ GPUs of the flavor when the tenant has no GPU-memory quota."""
        out: Usage = {}
        for key, amount in usage.items():
            charged_key, charged = self._charged_as(key, amount)
            out[charged_key] = out.get(charged_key, 0) + charged
        for key, amount in list(out.items()):
            flavor = flavor_of_key(key)
            per_gpu = self.gpu_memory.get(flavor, 0)
            if not (is_gpu_memory_key(key) and amount and per_gpu):
                continue
            if not self._has_memory_quota(tenant, key):
                out[flavor] = out.get(flavor, 0) + math.ceil(amount / per_gpu)
        return out

    def _charged_as(self, key: str, amount: int) -> tuple[str, int]:
        """A raw share key → the flavor's GPU-memory key and MB; other keys as they are."""
        flavor = flavor_of_key(key)
        if key.endswith(_RAW_MILLI):
            return gpu_memory_key(flavor), amount * self.gpu_memory.get(flavor, 0) // 1000
        if key.endswith(_RAW_MB):
            return gpu_memory_key(flavor), amount
        return key, amount

    def _has_memory_quota(self, tenant: str, key: str) -> bool:
        return key.upper() in self._quotas.get(tenant, {})

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
        """Guaranteed amount of `key` for `tenant`; None when `key` is not quota-managed
        (worked out once per tenant and key: the tenants are fixed for a book)."""
        if (tenant, key) not in self._guarantees:
            self._guarantees[tenant, key] = self._guarantee(tenant, key)
        return self._guarantees[tenant, key]

    def _guarantee(self, tenant: str, key: str) -> int | None:
        if not self.enabled:
            return None
        if key in (CPU, MEMORY):
            t = self.tenants.get(tenant)
            return None if t is None else (t.cpu_milli if key == CPU else t.memory_mb)
        q = self.quota(tenant, key)
        if is_gpu_memory_key(key):
            return q.guaranteed if q else None  # no GPU-memory quota: charged in GPUs
        return q.guaranteed if q else 0

    def usage(self, tenant: str, key: str) -> int:
        return self.used.get(tenant, {}).get(key, 0)

    def borrowing(self, tenant: str, key: str) -> int:
        """How much of `key` the tenant uses beyond its guarantee now."""
        guaranteed = self.guarantee(tenant, key)
        return 0 if guaranteed is None else max(0, self.usage(tenant, key) - guaranteed)

    def borrows_any(self, tenant: str) -> bool:
        """Whether the tenant uses more than its guarantee of any resource now."""
        return any(self.borrowing(tenant, key) > 0 for key in self.used.get(tenant, {}))

    def reserved(self, tenant: str, key: str) -> int:
        """Unused guarantee of `tenant` that it does not lend (0 without a lending limit)."""
        q = self.quota(tenant, key)
        if q is None or q.lending_limit is None:
            return 0
        unused = max(0, q.guaranteed - self.usage(tenant, key))
        return max(0, unused - q.lending_limit)

    def verdict(self, tenant: str, usage: Usage, free: Callable[[str], int]) -> QuotaVerdict:
        """Would `usage` more for `tenant` be guaranteed, borrowed, or refused by quota."""
        return self.verdict_normalised(tenant, self.normalise(tenant, usage), free)

    def verdict_normalised(
        self, tenant: str, usage: Usage, free: Callable[[str], int]
    ) -> QuotaVerdict:
        """`verdict` of a usage that `normalise` already gave for `tenant`."""
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
        return QuotaVerdict(tuple(borrowed)) if borrowed else GUARANTEED

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


def _quota_keys(t: Tenant) -> dict[str, FlavorQuota]:
    """A tenant's quotas by upper-cased key: each flavor, and its GPU memory when stated (as a
    FlavorQuota in MB under `gpu_memory_key`)."""
    out = {q.flavor.upper(): q for q in t.quotas}
    for q in t.quotas:
        if q.gpu_memory_mb is not None:
            key = gpu_memory_key(q.flavor)
            out[key.upper()] = FlavorQuota(
                key, q.gpu_memory_mb, q.gpu_memory_borrowing_limit_mb, q.gpu_memory_lending_limit_mb
            )
    return out
