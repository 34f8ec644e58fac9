"""Storage roots (issue 3, item 9): a job's `dataDir` and `outputDir` must lie under one of
its tenant's storage roots, after symlinks and `..` are resolved (`os.path.realpath`), so a
link inside an allowed root cannot point a task at another team's data.

Refusals name only what the user gave and the tenant's own roots, never what a path
resolves to (`/proc/self/fd/3` would name the server's database); a path that cannot even be
resolved (`/proc/1/exe`: EACCES) is refused the same way (422, not 500).
"""

from __future__ import annotations

import os

from gpuyard.model import Tenant
from gpuyard.spec import FieldError, JobSpec

DIR_FIELDS = (("dataDir", "data_dir"), ("outputDir", "output_dir"))


def resolved(path: str) -> str:
    """`path` with every link and `..` followed; OSError when that fails (EACCES)."""
    return os.path.realpath(path, strict=False)


def is_under(path: str, root: str) -> bool:
    """Whether the resolved `path` is `root` or inside it (both resolved)."""
    p, r = resolved(path), resolved(root)
    return os.path.commonpath([p, r]) == r


def storage_errors(spec: JobSpec, tenant: Tenant) -> list[FieldError]:
    errors = []
    for path, attr in DIR_FIELDS:
        value = getattr(spec, attr)
        if value and (problem := root_problem(value, tenant)):
            errors.append(FieldError(path, problem))
    return errors


def root_problem(value: str, tenant: Tenant) -> str | None:
    """Why the host path `value` is not under one of `tenant`'s storage roots (None: it is)."""
    try:
        if any(is_under(value, root) for root in tenant.storage_roots):
            return None
        moved = resolved(value) != os.path.normpath(value)
    except (OSError, ValueError) as e:  # ValueError: a NUL byte (refused by the spec first)
        why = e.strerror if isinstance(e, OSError) and e.strerror else "it cannot be resolved"
        return f"{value} cannot be checked against the storage roots of {tenant.name}: {why}"
    return _refusal(value, tenant, moved)


def _refusal(value: str, tenant: Tenant, moved: bool) -> str:
    shown = f"{value} (after following its links)" if moved else value
    if not tenant.storage_roots:
        return (
            f"{shown} is not allowed: tenant {tenant.name} has no storage roots, so its "
            "jobs may not mount host dirs; a platform admin can add some with "
            f"`gpuyard admin tenant update {tenant.name} --storage-root PATH`"
        )
    roots = ", ".join(tenant.storage_roots)
    return f"{shown} is outside the storage roots of tenant {tenant.name}: {roots}"
