"""The job spec: our YAML/JSON format and OpenPAI protocol v2, validated into `JobSpec`.

spec = load_job_spec(body, content_type)   # raises SpecError with every bad field
job = load_job(body, content_type)         # .spec, .warnings (accepted, not honoured), .original
demand = job_demand(spec, job_id, seq)     # what the scheduler places
doc = spec.to_document()                   # normalised, our format; parse_job_spec(doc) == spec
"""

from gpuyard.spec.arrays import ArrayRequest
from gpuyard.spec.demand import job_demand
from gpuyard.spec.errors import FieldError, SpecError
from gpuyard.spec.loader import (
    LoadedJob,
    array_children,
    load_job,
    load_job_spec,
    parse_job,
    parse_job_spec,
    read_document,
)
from gpuyard.spec.models import After, JobSpec, Secret, TaskRoleSpec, reveal
from gpuyard.spec.notices import FieldWarning

__all__ = [
    "After",
    "ArrayRequest",
    "array_children",
    "FieldError",
    "FieldWarning",
    "JobSpec",
    "LoadedJob",
    "Secret",
    "SpecError",
    "TaskRoleSpec",
    "job_demand",
    "load_job",
    "load_job_spec",
    "parse_job",
    "parse_job_spec",
    "read_document",
    "reveal",
]
