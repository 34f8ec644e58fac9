"""Tenants (teams): guaranteed quotas per GPU flavor, borrowing and lending, fair-share weight,
queue policy, per-user limits, GPU-hour budgets, storage roots, the idle-GPU policy, the
interactive jobs' idle timeout.

Words as in DESIGN.md: a job inside its tenant's guaranteed quota is *guaranteed*; one that
borrows idle capacity of other tenants beyond it is *opportunistic* and may be preempted when
the lender reclaims. A flavor is a GPU type as nodes report it (`A100-80GB`); a job's
`gpuType: A100` may use any flavor it matches (`gpu_type_matches`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from gpuyard.model.value import Value


class QueuePolicy(enum.StrEnum):
    FIFO = "fifo"  # priority, then submission order
    LAS = "las"  # priority, then least attained GPU service (Tiresias), with promotion


class BudgetPeriod(enum.StrEnum):
    DAY = "day"
    WEEK = "week"
    MONTH = "month"


class IdleGpuAction(enum.StrEnum):
    """What happens to a running job whose GPUs all stay idle for the tenant's window."""

    OFF = "off"  # not watched
    FLAG = "flag"  # an `IdleGPU` event on the job and the gpuyard_job_idle_gpu metric
    STOP = "stop"  # stopped with reason `IdleGPU`, never retried


class SeccompMode(enum.StrEnum):
    """The syscall filter of the tenant's tasks (docs/runtime.md, *Syscalls*)."""

    DEFAULT = "default"  # Docker's default profile: no mount, no new (user) namespaces, ...
    UNCONFINED = "unconfined"  # no filter: only a platform admin sets it, for a trusted tenant


# Each tenant owns a block of host ids: its tasks run as the block's first id (uid = gid), the
# rest is kept for mapping a user namespace onto it. Far above the ids of people (1000+) and
# of subordinate id ranges (/etc/subuid, 100000+), as OpenShift does for its namespaces.
TENANT_ID_BASE = 1 << 30
TENANT_ID_BLOCK = 1 << 16
TENANT_ID_MAX_BLOCKS = ((1 << 32) - 2 - TENANT_ID_BASE) // TENANT_ID_BLOCK


def tenant_uid(block: int) -> int:
    """The host uid (and gid) of the tenant that holds id block `block` (0, 1, ...)."""
    if not 0 <= block < TENANT_ID_MAX_BLOCKS:
        raise ValueError(f"no tenant id block {block}: 0 to {TENANT_ID_MAX_BLOCKS - 1}")
    return TENANT_ID_BASE + block * TENANT_ID_BLOCK


@dataclass(frozen=True, slots=True)
class FlavorQuota(Value):
    """Guaranteed GPUs of one flavor, and how far the tenant may go beyond it / lend of it.

    `borrowing_limit`: at most this many GPUs of the flavor above the guarantee (None: any
    idle). `lending_limit`: at most this many of its unused guaranteed GPUs lent to others
    (None: all of them).

    `gpu_memory_mb`: guaranteed GPU memory of the flavor, in MB, for shared-GPU tasks, with
    its own borrowing and lending limits (MB). None: the tenant's shared tasks are charged
    against the GPU count instead (docs/gpu-sharing.md).
    """

    flavor: str
    guaranteed: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None
    gpu_memory_mb: int | None = None
    gpu_memory_borrowing_limit_mb: int | None = None
    gpu_memory_lending_limit_mb: int | None = None


@dataclass(frozen=True, slots=True)
class Tenant(Value):
    name: str
    quotas: tuple[FlavorQuota, ...] = ()
    cpu_milli: int | None = None  # guaranteed CPU (None: not limited by quota)
    memory_mb: int | None = None  # guaranteed memory (None: not limited by quota)
    weight: float = 1.0  # fair-share weight across tenants
    queue_policy: QueuePolicy = QueuePolicy.LAS  # issue 16: LAS inside a tenant by default
    priority_preemption: bool = False  # may a higher-priority job preempt one of the tenant's?
    # the highest priority its members may give their jobs (submit, `gpuyard priority`);
    # None: the spec's whole range. Its tenant admins and platform admins may go above
    max_priority: int | None = None
    preemption_grace_s: int = 30  # SIGTERM → SIGKILL for this tenant's preempted jobs
    max_gpus_per_user: int | None = None
    max_running_jobs_per_user: int | None = None
    gpu_hour_budget: float | None = None
    budget_period: BudgetPeriod = BudgetPeriod.MONTH
    storage_roots: tuple[str, ...] = field(default=())  # where dataDir/outputDir may point
    allow_root: bool = False  # tasks as the host's root, no user namespace (runtime/userns.py)
    seccomp: SeccompMode = SeccompMode.DEFAULT  # the tasks' syscall filter (admins set it)
    log_limit_mb: int = 100  # each task's log keeps its head and tail within this (MiB)
    # each task's /workspace and image-root writes, MiB each (a tmpfs: counts as memory);
    # None: the task's memory limit; 0: no quota, on the node's disk (admins set it)
    workspace_mb: int | None = None
    # the host uid and gid of the tenant's tasks and of the storage roots the platform makes
    # for it; assigned by the store at creation (`tenant_uid`), never chosen by a caller
    uid: int | None = None
    # idle GPUs: every GPU of a running job under the threshold (NVML utilisation, %) for the
    # window is idle; fake GPUs have no utilisation and are never idle (docs/observability.md)
    idle_gpu_action: IdleGpuAction = IdleGpuAction.FLAG
    idle_gpu_threshold_pct: float = 5.0
    idle_gpu_window_s: int = 1800
    # an interactive job (`gpuyard run`) with no session attached for this long (seconds:
    # none ever, or the last one went away) is stopped, reason `SessionIdle`
    # (docs/interactive.md); at least 60
    interactive_idle_timeout_s: int = 900
    # may the tenant's webhooks reach loopback, link-local and private addresses (the API,
    # cloud metadata, the machine's network)? Only a platform admin sets it (docs/auth.md)
    allow_private_webhooks: bool = False
    # may the tenant's tasks reach beyond the cluster (the internet, the site's network)? Never
    # the cluster's nodes, other jobs' tasks or link-local addresses (docs/runtime.md, Network)
    allow_internet: bool = False
    # may its jobs ask for `hostNetwork: true` (the node's network namespace, e.g. NCCL over
    # InfiniBand)? Such tasks reach everything the node does; only a platform admin grants it
    allow_host_network: bool = False

    def quota(self, flavor: str) -> FlavorQuota | None:
        for q in self.quotas:
            if q.flavor == flavor:
                return q
        return None

    @property
    def guaranteed_gpus(self) -> int:
        return sum(q.guaranteed for q in self.quotas)
