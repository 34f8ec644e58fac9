"""Pure scheduling policy: queue order, quotas and fair share, gang placement, reclaim,
pending reasons. No I/O, no clock.

`schedule(nodes, held, queued)` is the v1 single-queue cycle; `Scheduler().cycle(view)` the
multi-tenant one (see docs/scheduler.md). `make compiled` builds a copy of the package whose
hot scheduler modules are compiled by mypyc (same decisions, about twice as fast: docs/sim.md);
`compiled()` says which one runs.
"""

from gpuyard.scheduler import multitenant as _multitenant
from gpuyard.scheduler.baselines import POLICIES
from gpuyard.scheduler.cycle import CycleResult, CycleStats, queue_order, schedule
from gpuyard.scheduler.explain import without_place
from gpuyard.scheduler.multitenant import Scheduler
from gpuyard.scheduler.placement import explain_no_fit, place_job
from gpuyard.scheduler.reasons import PendingCode, PendingReason
from gpuyard.scheduler.snapshot import ClusterSnapshot
from gpuyard.scheduler.view import Admission, ClusterView, Preemption, SchedulerConfig

__all__ = [
    "Admission",
    "ClusterSnapshot",
    "ClusterView",
    "CycleResult",
    "CycleStats",
    "POLICIES",
    "PendingCode",
    "PendingReason",
    "Preemption",
    "Scheduler",
    "SchedulerConfig",
    "explain_no_fit",
    "without_place",
    "place_job",
    "queue_order",
    "compiled",
    "schedule",
]


def compiled() -> bool:
    """Whether the scheduler's modules run compiled by mypyc (`make compiled`)."""
    return not str(_multitenant.__file__).endswith(".py")
