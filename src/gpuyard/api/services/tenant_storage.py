"""Tenants' named storage (model/storage.py): set, list and remove (platform admins), and what
a job's `storage` names resolve to at submission.

A storage's host path passes the checks a job's `dataDir` passes, against its own tenant's
storage roots (api/services/storage.py: every link and `..` followed, then under a root); the
node walks it again at launch beneath those roots without following links (runtime/hostdirs.py).
A job's names are resolved in the job's own tenant and nowhere else: a name another tenant
has reads exactly as one that no tenant has.
"""

from __future__ import annotations

from typing import Any

from gpuyard.api.errors import InvalidInput
from gpuyard.api.schemas.tenant_storage import StorageIn
from gpuyard.api.services.storage import root_problem
from gpuyard.api.services.tenants import get as get_tenant
from gpuyard.controller import Controller
from gpuyard.model import Tenant
from gpuyard.model.storage import (
    StorageMount,
    default_mount_point,
    mount_point_problem,
    overlapping,
    storage_name_problem,
)
from gpuyard.spec import FieldError, JobSpec
from gpuyard.spec.errors import Errors
from gpuyard.spec.fields import read_host_path
from gpuyard.spec.openpai import is_openpai
from gpuyard.spec.openpai_storage import storage_paths
from gpuyard.store import StorageEntry


def entries(ctl: Controller, tenant: str) -> list[StorageEntry]:
    get_tenant(ctl, tenant)
    return ctl.store.storage.entries(tenant)


def set_storage(ctl: Controller, tenant: str, name: str, body: StorageIn,
                by: str) -> StorageEntry:
    """Check and store `tenant`'s storage `name` (InvalidInput naming each bad field)."""
    record = get_tenant(ctl, tenant)
    mount = StorageMount(name, body.path, body.mount_point or default_mount_point(name),
                         body.read_only)
    others = [e.mount for e in ctl.store.storage.entries(tenant) if e.mount.name != name]
    if errors := mount_errors(mount, record.tenant, others):
        n = len(errors)
        raise InvalidInput(f"the storage has {n} error{'s' if n != 1 else ''}", errors)
    return ctl.store.storage.set(tenant, mount, by)


def mount_errors(
    mount: StorageMount, tenant: Tenant, others: list[StorageMount]
) -> list[tuple[str, str]]:
    """(field path, message) for each problem of `mount` as `tenant`'s storage."""
    errors: list[tuple[str, str]] = []
    if (problem := storage_name_problem(mount.name)) is not None:
        errors.append(("name", f"{problem}, got {mount.name!r}"))
    errs = Errors()
    if read_host_path(errs, "path", mount.path) is None:
        errors += [(e.path, e.message) for e in errs.items]
    elif (problem := root_problem(mount.path, tenant)) is not None:
        errors.append(("path", problem))
    if (problem := mount_point_problem(mount.mount_point)) is not None:
        errors.append(("mountPoint", f"{problem}, got {mount.mount_point!r}"))
    else:
        for other in others:
            if overlapping([mount.mount_point, other.mount_point]) is not None:
                errors.append(("mountPoint", f"{mount.mount_point} overlaps {other.mount_point},"
                               f" the mount point of storage {other.name}"))  # fmt: skip
    return errors


def remove(ctl: Controller, tenant: str, name: str) -> None:
    get_tenant(ctl, tenant)
    if not ctl.store.storage.remove(tenant, name):
        raise LookupError(f"tenant {tenant} has no storage named {name}")


def job_storage_errors(
    ctl: Controller, spec: JobSpec, tenant: Tenant, original: dict[str, Any] | None
) -> list[FieldError]:
    """Each of the job's `storage` names that is not (or no longer usable as) a storage of its
    own tenant, at the path the user wrote it (an OpenPAI plugin's storageConfigNames[j])."""
    if not spec.storage:
        return []
    mounts = ctl.store.storage.mounts(tenant.name)
    paths = storage_paths(original) if original is not None and is_openpai(original) else {}
    errors = []
    for i, name in enumerate(spec.storage):
        where = paths.get(f"storage[{i}]", f"storage[{i}]")
        mount = mounts.get(name)
        if mount is None:
            errors.append(FieldError(where, f"tenant {tenant.name} has no storage named "
                                     f"{name!r} (`gpuyard admin storage ls {tenant.name}` "
                                     "lists them; a platform admin adds one with `gpuyard admin "
                                     "storage set`)"))  # fmt: skip
        elif root_problem(mount.path, tenant) is not None:
            errors.append(FieldError(where, f"storage {name} of tenant {tenant.name} is no "
                                     "longer under its storage roots: a platform admin must "
                                     "set it again"))  # fmt: skip
    return errors
