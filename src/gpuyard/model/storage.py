"""A tenant's named storage: what OpenPAI's `teamwise_storage` plugin (and our `storage` field)
mounts into a job's tasks by name.

A platform admin defines, per tenant, `name → host path, mount point, read-only or not`
(`gpuyard admin storage set`, `PUT /api/v1/tenants/{t}/storage/{name}`); a job names them
(`storage: [name]`). A name means something only within its own tenant: a job resolves it
against its tenant's storage, nowhere else. The host path lies under the tenant's storage
roots and is walked beneath one at launch without following symlinks, as dataDir is
(runtime/hostdirs.py). The rules here are the ones every layer checks the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

STORAGE_NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,62}")  # OpenPAI's: PAI_SHARE, confignfs
STORAGE_NAME_RULE = "1 to 63 of A-Z a-z 0-9 _ -, starting with a letter"
MOUNT_PARENT = "/mnt"  # every mount point lies below it: never over a dir the task relies on
MAX_MOUNT_POINT = 1024
MAX_JOB_STORAGE = 16


@dataclass(frozen=True, slots=True)
class StorageMount:
    """One named storage of a tenant, as a task mounts it."""

    name: str
    path: str  # absolute host path, under one of the tenant's storage roots
    mount_point: str  # absolute path in the container, below /mnt
    read_only: bool = True


def default_mount_point(name: str) -> str:
    return f"{MOUNT_PARENT}/{name}"


def storage_name_problem(name: object) -> str | None:
    """Why `name` is not a storage name (None: it is)."""
    if not isinstance(name, str) or not STORAGE_NAME_RE.fullmatch(name):
        return f"must be a storage name ({STORAGE_NAME_RULE})"
    return None


def mount_point_problem(point: str) -> str | None:
    """Why `point` cannot be a mount point in a task (None: it can): an absolute, normal
    path strictly below /mnt, no `..`, no NUL or newline."""
    if len(point) > MAX_MOUNT_POINT or any(c in point for c in "\0\n\r"):
        return f"must be a path of at most {MAX_MOUNT_POINT} characters on one line"
    p = PurePosixPath(point)
    if not point.startswith("/") or ".." in p.parts or str(p) != point.rstrip("/") or "//" in point:
        return "must be an absolute, normalised path (no '..', no '//')"
    if PurePosixPath(MOUNT_PARENT) not in p.parents:
        return f"must lie below {MOUNT_PARENT} (e.g. {MOUNT_PARENT}/NAME)"
    return None


def overlapping(points: list[str]) -> tuple[str, str] | None:
    """Two of `points` that are equal or nested (one would hide the other), if any."""
    paths = [PurePosixPath(p) for p in points]
    for i, a in enumerate(paths):
        for b in paths[i + 1 :]:
            if a == b or a in b.parents or b in a.parents:
                return str(a), str(b)
    return None
