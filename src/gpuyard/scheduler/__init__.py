"""Pure scheduling policy: queue order, gang placement, pending reasons. No I/O, no clock."""

from gpuyard.scheduler.cycle import CycleResult, CycleStats, queue_order, schedule
from gpuyard.scheduler.placement import explain_no_fit, place_job
from gpuyard.scheduler.reasons import PendingCode, PendingReason
from gpuyard.scheduler.snapshot import ClusterSnapshot

__all__ = [
    "ClusterSnapshot",
    "CycleResult",
    "CycleStats",
    "PendingCode",
    "PendingReason",
    "explain_no_fit",
    "place_job",
    "queue_order",
    "schedule",
]
