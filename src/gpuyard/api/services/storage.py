"""Storage roots (issue 3, item 9): a job's `dataDir` and `outputDir` must lie under one of
its tenant's storage roots, after symlinks and `..` are resolved (`os.path.realpath`), so a
link inside an allowed root cannot point a task at another team's data.
"""

from __future__ import annotations

import os

from gpuyard.model import Tenant
from gpuyard.spec import FieldError, JobSpec, SpecError

DIR_FIELDS = (("dataDir", "data_dir"), ("outputDir", "output_dir"))


def resolved(path: str) -> str:
    return os.path.realpath(path)


def is_under(path: str, root: str) -> bool:
    """Whether the resolved `path` is `root` or inside it (both resolved)."""
    p, r = resolved(path), resolved(root)
    return os.path.commonpath([p, r]) == r


def storage_errors(spec: JobSpec, tenant: Tenant) -> list[FieldError]:
    errors = []
    for path, attr in DIR_FIELDS:
        value = getattr(spec, attr)
        if value and not any(is_under(value, root) for root in tenant.storage_roots):
            errors.append(FieldError(path, _refusal(value, tenant)))
    return errors


def check_storage(spec: JobSpec, tenant: Tenant) -> None:
    """Raise `SpecError` (422) naming each dir outside the tenant's storage roots."""
    if errors := storage_errors(spec, tenant):
        raise SpecError(errors)


def _refusal(value: str, tenant: Tenant) -> str:
    real = resolved(value)
    shown = value if real == value else f"{value} (resolves to {real})"
    if not tenant.storage_roots:
        return (
            f"{shown} is not allowed: tenant {tenant.name} has no storage roots, so its "
            "jobs may not mount host dirs; a platform admin can add some with "
            f"`gpuyard admin tenant update {tenant.name} --storage-root PATH`"
        )
    roots = ", ".join(tenant.storage_roots)
    return f"{shown} is outside the storage roots of tenant {tenant.name}: {roots}"
