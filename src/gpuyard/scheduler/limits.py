"""Per-user limits inside a tenant and GPU-hour budgets per tenant.

A user's GPUs and running jobs count the tenant's running jobs of that owner plus those
admitted earlier in the same cycle. A job without an owner is not limited. A tenant whose
`usage.gpu_hours` reached its `gpu_hour_budget` admits nothing new until the period ends
(running jobs go on); its queued jobs wait with `BudgetExhausted`.

A job without gang allocation is refused only when not even its smallest task fits under
the owner's GPU limit (it starts with the tasks that do, `gpu_room`); the not yet placed
tasks of such a running job (`JobDemand.remainder`) are not a new job for the job limit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from gpuyard.model import JobDemand, RunningJob, Tenant, TenantUsage
from gpuyard.scheduler.reasons import PendingCode, PendingReason


class UserLimits:
    def __init__(self, tenants: Mapping[str, Tenant], running: Sequence[RunningJob]) -> None:
        self.tenants = tenants
        self.gpus: Counter[tuple[str, str]] = Counter()
        self.jobs: Counter[tuple[str, str]] = Counter()
        limited = {name for name, t in tenants.items() if _has_user_limits(t)}
        for r in running if limited else ():
            if r.tenant in limited and r.owner is not None:
                self.gpus[r.tenant, r.owner] += r.gpus
                self.jobs[r.tenant, r.owner] += 1

    def refusal(self, job: JobDemand) -> PendingReason | None:
        t = self.tenants.get(job.tenant)
        if t is None or job.owner is None or not _has_user_limits(t):
            return None
        key = (job.tenant, job.owner)
        gpus = job.total.gpus if job.gang else min(x.resources.gpus for x in job.tasks)
        if (
            not job.remainder
            and t.max_running_jobs_per_user is not None
            and self.jobs[key] >= t.max_running_jobs_per_user
        ):
            return PendingReason(
                PendingCode.USER_JOB_LIMIT,
                f"user {job.owner} already runs {self.jobs[key]} jobs in tenant {job.tenant}; "
                f"the limit is {t.max_running_jobs_per_user}",
            )
        if t.max_gpus_per_user is not None and self.gpus[key] + gpus > t.max_gpus_per_user:
            return PendingReason(
                PendingCode.USER_GPU_LIMIT,
                f"user {job.owner} uses {self.gpus[key]} GPUs in tenant {job.tenant}; with "
                f"this job's {gpus} that is over the limit of {t.max_gpus_per_user}",
            )
        return None

    def gpu_room(self, job: JobDemand) -> int | None:
        """How many more whole GPUs `job`'s owner may take in its tenant (None: no limit)."""
        t = self.tenants.get(job.tenant)
        if t is None or job.owner is None or t.max_gpus_per_user is None:
            return None
        return t.max_gpus_per_user - self.gpus[job.tenant, job.owner]

    def admitted(self, job: JobDemand) -> None:
        if job.owner is not None and job.tenant in self.tenants:
            self.gpus[job.tenant, job.owner] += job.total.gpus
            self.jobs[job.tenant, job.owner] += 0 if job.remainder else 1


def _has_user_limits(t: Tenant) -> bool:
    return t.max_gpus_per_user is not None or t.max_running_jobs_per_user is not None


def budget_refusal(
    tenant: str, tenants: Mapping[str, Tenant], usage: Mapping[str, TenantUsage]
) -> PendingReason | None:
    t = tenants.get(tenant)
    if t is None or t.gpu_hour_budget is None:
        return None
    used = usage.get(tenant, TenantUsage())
    if used.gpu_hours < t.gpu_hour_budget:
        return None
    return PendingReason(
        PendingCode.BUDGET_EXHAUSTED,
        f"tenant {tenant} used {used.gpu_hours:.1f} of its {t.gpu_hour_budget:g} GPU-hour "
        f"budget this {t.budget_period}; new jobs start when the period ends",
        estimated_start=used.period_ends_at,
    )
