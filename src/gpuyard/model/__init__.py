"""Domain types shared by every layer: resources, GPUs, nodes, job and task states."""

from gpuyard.model.clock import Clock, ManualClock, SystemClock
from gpuyard.model.demand import (
    OPPORTUNISTIC_BELOW,
    GpuShare,
    JobDemand,
    PriorityClass,
    TaskDemand,
    standing,
)
from gpuyard.model.placement import JobPlacement, TaskPlacement
from gpuyard.model.resources import (
    CordonState,
    GpuDevice,
    Node,
    NodeCordon,
    Resources,
    gpu_type_matches,
)
from gpuyard.model.running import RunningJob, TenantUsage
from gpuyard.model.states import (
    JOB_TRANSITIONS,
    FailureClass,
    IllegalTransition,
    JobState,
    TaskReason,
    TaskState,
    array_state,
    check_job_transition,
    failure_class,
)
from gpuyard.model.tenant import (
    TENANT_ID_BLOCK,
    BudgetPeriod,
    FlavorQuota,
    IdleGpuAction,
    QueuePolicy,
    Tenant,
    tenant_uid,
)

__all__ = [
    "BudgetPeriod",
    "FlavorQuota",
    "QueuePolicy",
    "PriorityClass",
    "OPPORTUNISTIC_BELOW",
    "standing",
    "RunningJob",
    "TenantUsage",
    "Tenant",
    "TENANT_ID_BLOCK",
    "tenant_uid",
    "IdleGpuAction",
    "JOB_TRANSITIONS",
    "array_state",
    "Clock",
    "CordonState",
    "NodeCordon",
    "FailureClass",
    "GpuDevice",
    "GpuShare",
    "IllegalTransition",
    "JobDemand",
    "JobPlacement",
    "JobState",
    "ManualClock",
    "Node",
    "Resources",
    "SystemClock",
    "TaskDemand",
    "TaskPlacement",
    "TaskReason",
    "TaskState",
    "check_job_transition",
    "failure_class",
    "gpu_type_matches",
]
