"""The job spec: our YAML/JSON format and OpenPAI protocol v2, validated into `JobSpec`.

spec = load_job_spec(body, content_type)   # raises SpecError with every bad field
demand = job_demand(spec, job_id, seq)     # what the scheduler places
doc = spec.to_document()                   # normalised, our format; parse_job_spec(doc) == spec
"""

from gpuyard.spec.demand import job_demand
from gpuyard.spec.errors import FieldError, SpecError
from gpuyard.spec.loader import load_job_spec, parse_job_spec, read_document
from gpuyard.spec.models import JobSpec, Secret, TaskRoleSpec, reveal

__all__ = [
    "FieldError",
    "JobSpec",
    "Secret",
    "SpecError",
    "TaskRoleSpec",
    "job_demand",
    "load_job_spec",
    "parse_job_spec",
    "read_document",
    "reveal",
]
