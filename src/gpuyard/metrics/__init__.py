"""Prometheus exposition: what the platform exports at `/metrics` (docs/observability.md).

`ClusterCollector` turns a `ClusterSample` (plain values, read from the store, the engine,
cgroups and NVML when Prometheus scrapes) into metric families; `dcgm` names GPU readings the
way NVIDIA's dcgm-exporter does; `Instruments` holds what can only be counted as it happens
(queueing delays, cycle latencies, job ends, idle flags, webhook deliveries); `exposition`
puts them in one registry and renders it; `WithoutJobs` is what an open /metrics shows (no
job, task or user labels).
"""

from gpuyard.metrics.anonymous import WithoutJobs
from gpuyard.metrics.collector import ClusterCollector
from gpuyard.metrics.exposition import CONTENT_TYPE, build_registry, render
from gpuyard.metrics.instruments import Instruments
from gpuyard.metrics.sample import (
    ClusterSample,
    GpuAllocation,
    GpuReading,
    NodeSample,
    QueueSample,
    TaskUsage,
    TenantBudget,
    TenantFlavor,
)

__all__ = [
    "CONTENT_TYPE",
    "ClusterCollector",
    "ClusterSample",
    "GpuAllocation",
    "GpuReading",
    "Instruments",
    "NodeSample",
    "QueueSample",
    "TaskUsage",
    "TenantBudget",
    "TenantFlavor",
    "WithoutJobs",
    "build_registry",
    "render",
]
