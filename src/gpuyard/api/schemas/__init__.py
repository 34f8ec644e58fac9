"""Request and response bodies of the REST API (camelCase JSON), one module per resource."""

from gpuyard.api.schemas.common import (
    ErrorOut,
    FieldErrorOut,
    Out,
    camel,
    camel_keys,
    iso,
    snake_keys,
)
from gpuyard.api.schemas.jobs import (
    Cancelled,
    EventList,
    EventOut,
    GpuRef,
    JobDetail,
    JobList,
    JobSummary,
    SpecErrorOut,
    Submitted,
    TaskOut,
    event_out,
    job_summary,
    task_out,
)
from gpuyard.api.schemas.nodes import Allocated, GpuOut, NodeList, NodeOut

__all__ = [
    "Allocated",
    "Cancelled",
    "ErrorOut",
    "EventList",
    "EventOut",
    "FieldErrorOut",
    "GpuOut",
    "GpuRef",
    "JobDetail",
    "JobList",
    "JobSummary",
    "NodeList",
    "NodeOut",
    "Out",
    "SpecErrorOut",
    "Submitted",
    "TaskOut",
    "camel",
    "camel_keys",
    "event_out",
    "iso",
    "job_summary",
    "snake_keys",
    "task_out",
]
