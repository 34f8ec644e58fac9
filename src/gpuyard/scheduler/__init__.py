"""Pure scheduling policy: queue order, quotas and fair share, gang placement, reclaim,
pending reasons. No I/O, no clock.

`schedule(nodes, held, queued)` is the v1 single-queue cycle; `Scheduler().cycle(view)` the
multi-tenant one (see docs/scheduler.md).
"""

from gpuyard.scheduler.baselines import POLICIES
from gpuyard.scheduler.cycle import CycleResult, CycleStats, queue_order, schedule
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
    "place_job",
    "queue_order",
    "schedule",
]
