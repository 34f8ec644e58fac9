"""The inputs and outputs of a multi-tenant scheduling cycle, as plain immutable values."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from gpuyard.model import JobDemand, Node, RunningJob, Tenant, TenantUsage


@dataclass(frozen=True, slots=True, init=False)
class ViewChanges:
    """How a view differs from the view numbered `since` that the same caller handed to the
    same scheduler. Queue: `left` — job ids whose queued demand is gone or replaced (started,
    cancelled, a new attempt); `joined` — the current queued demands of jobs that joined or
    were replaced (an id may be in both: it left and came back). Running: `stopped` — job ids
    no longer holding resources; `started` — the current `RunningJob` of jobs that started
    or changed (e.g. now terminating), new ones in the order they appear in `running`."""

    since: int
    left: frozenset[str]
    joined: tuple[JobDemand, ...]
    stopped: frozenset[str]
    started: tuple[RunningJob, ...]

    def __init__(
        self,
        since: int,
        left: frozenset[str] = frozenset(),
        joined: tuple[JobDemand, ...] = (),
        stopped: frozenset[str] = frozenset(),
        started: tuple[RunningJob, ...] = (),
    ) -> None:  # by hand: compiled, it is built natively (docs/sim.md, Fast replays)
        object.__setattr__(self, "since", since)
        object.__setattr__(self, "left", left)
        object.__setattr__(self, "joined", joined)
        object.__setattr__(self, "stopped", stopped)
        object.__setattr__(self, "started", started)


@dataclass(frozen=True, slots=True, init=False)
class ClusterView:
    """Everything one cycle decides from. `now` is the caller's clock (seconds).

    `queued` and `running` are always complete. A caller that keeps them between cycles (the
    simulator) may number its views (`number`) and say what changed since the previous one
    (`changes`): the scheduler then brings its sorted queues and its snapshot up to date from
    the changes alone, so a cycle costs the same with ten or ten thousand jobs queued.
    Without `changes`, or when `changes.since` is not the last view it saw, or when the
    changes do not add up to `queued`/`running`, it compares the whole lists (the controller).
    """

    nodes: Sequence[Node]
    tenants: Mapping[str, Tenant]
    running: Sequence[RunningJob]
    queued: Collection[JobDemand]
    usage: Mapping[str, TenantUsage]
    now: float
    number: int
    changes: ViewChanges | None

    def __init__(
        self,
        nodes: Sequence[Node],
        tenants: Mapping[str, Tenant] | None = None,
        running: Sequence[RunningJob] = (),
        queued: Collection[JobDemand] = (),
        usage: Mapping[str, TenantUsage] | None = None,
        now: float = 0.0,
        number: int = 0,
        changes: ViewChanges | None = None,
    ) -> None:  # by hand: compiled, it is built natively (docs/sim.md, Fast replays)
        object.__setattr__(self, "nodes", nodes)
        object.__setattr__(self, "tenants", {} if tenants is None else tenants)
        object.__setattr__(self, "running", running)
        object.__setattr__(self, "queued", queued)
        object.__setattr__(self, "usage", {} if usage is None else usage)
        object.__setattr__(self, "now", now)
        object.__setattr__(self, "number", number)
        object.__setattr__(self, "changes", changes)


@dataclass(frozen=True, slots=True, init=False)
class Admission:
    """How a job was admitted: guaranteed, or opportunistic borrowing `borrowed` per resource
    (GPU flavor, `cpu` in millicores, `memory` in MB) beyond its tenant's guarantee."""

    job_id: str
    tenant: str
    borrowed: tuple[tuple[str, int], ...]

    def __init__(
        self,
        job_id: str,
        tenant: str,
        borrowed: tuple[tuple[str, int], ...] = (),
    ) -> None:  # by hand: compiled, it is built natively (docs/sim.md, Fast replays)
        object.__setattr__(self, "job_id", job_id)
        object.__setattr__(self, "tenant", tenant)
        object.__setattr__(self, "borrowed", borrowed)

    @property
    def opportunistic(self) -> bool:
        return bool(self.borrowed)


@dataclass(frozen=True, slots=True)
class Preemption:
    """Stop `job_id` (SIGTERM, `grace_s` to checkpoint, then SIGKILL) to make room for
    `for_job_id`; the victim goes back to the queue as a new attempt."""

    job_id: str
    reason: str
    for_job_id: str
    grace_s: int


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """Policy knobs that are not per tenant.

    `aging_s`, `aging_per_run_s`: starvation protection by promotion (Tiresias). A queued
    job whose wait reaches max(`aging_s`, `aging_per_run_s` × the seconds it ran in earlier
    attempts) is promoted: it goes to the front of its tenant's queue and demotes as a job
    of the first LAS queue; nothing of its tenant is held back behind it (backfill goes on).
    `las_thresholds_gpu_s`: attained GPU-seconds that separate the LAS queues (Tiresias).
    `eta_max_releases`: how many running jobs the start estimate may release, at most.
    `tenant_backfill`: when a tenant's head cannot start, later jobs of that tenant may
    start if they fit now or can make room by demotion; `backfill_window` bounds how many
    jobs behind the head a cycle examines.
    `tenant_preemption`: a job may preempt (Tiresias' demotion) opportunistic jobs of other
    tenants in a higher LAS queue (more attained GPU service) than itself, and in tenants
    with the `las` queue policy also such jobs of its own tenant, guaranteed ones included;
    never a guaranteed job of another tenant. Victims: the highest LAS queue first, the
    newest there.
    The defaults are those measured best on Philly configurations B and C over five seeds
    (docs/scheduler.md, "The default policy").
    `least_served_first`: tenants' heads are ordered by their LAS queue (attained GPU
    service) before weighted dominant share, within each class (heads within their
    guarantee, then borrowers): idle capacity goes to the least-served job first.
    `policy`: `default` (this multi-tenant scheduler) or a baseline of `baselines.py`:
    `fifo`, `fifo-backfill`, `las`, `sjf-oracle`, `srtf-oracle` (the last two need oracle
    durations: simulation only).
    `explain`: a job that waits for capacity gets a message (what it needs, what is free,
    who holds it) and a start estimate; off, it gets its code alone. Neither decides
    anything; the simulator, which reads neither, turns it off (docs/sim.md, Fast replays).
    """

    aging_s: float = 48 * 3600.0
    aging_per_run_s: float = 4.0
    las_thresholds_gpu_s: tuple[float, ...] = (14_400.0, 144_000.0)
    eta_max_releases: int = 256
    policy: str = "default"
    tenant_backfill: bool = True
    backfill_window: int = 256
    tenant_preemption: bool = True
    least_served_first: bool = True
    explain: bool = True
