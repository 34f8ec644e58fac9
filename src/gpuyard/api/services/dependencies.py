"""Which jobs a spec's `after` may name: only jobs and job arrays its submitter can see.

A job of another tenant reads exactly as a job that does not exist (the same 422 at the same
path, `after.<kind>[i]`), so `after` can neither probe another tenant's job ids nor wait on
(and so time) another tenant's jobs (docs/security.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuyard.api.authz import job_actions
from gpuyard.controller import Controller
from gpuyard.spec import FieldError, JobSpec
from gpuyard.spec.errors import item, join
from gpuyard.store import UserRecord


@dataclass(frozen=True, slots=True)
class _Owned:
    """Who a job or an array belongs to, as `job_actions` reads it (`authz.Owned`)."""

    id: str
    tenant: str
    owner: str | None


def after_errors(ctl: Controller, caller: UserRecord | None, spec: JobSpec) -> list[FieldError]:
    """An error at `after.<kind>[i]` for each job `spec` waits for that `caller` cannot see
    (None: an unknown submitter sees none)."""
    if spec.after is None:
        return []
    owners = ctl.store.arrays.owners_of(spec.after.job_ids)
    errors = []
    for kind in ("ok", "any", "notok"):
        for i, dep in enumerate(getattr(spec.after, kind)):
            found = owners.get(dep)
            if caller is None or found is None or not job_actions(caller, _Owned(dep, *found)):
                errors.append(FieldError(item(join("after", kind), i), f"there is no job {dep}"))
    return errors
