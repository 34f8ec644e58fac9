"""A tenant's storage roots as the platform keeps them: its own, apart, and owned by it.

- **Apart**: no root of one tenant is, holds or lies in a root of another tenant (a tenant that
  owned the dir above another's root could rename it and put a link in its place), and no
  root is a system dir of the host (`/`, `/tmp`, `/home`, ... and anything under the dirs a
  task without an image sees, `/usr`, `/etc`, `/opt`, `/lib*`, ..., or the kernel's).
- **Owned**: a root that does not exist on this machine is made, owned by the tenant's uid and
  gid with mode 0700; an existing empty dir is handed over the same way. A non-empty dir is
  never changed (it may hold data of others, or be a shared mount): it is reported as such in
  the log, and what its modes allow is what the tenant's tasks get.

Inside a root, a task reaches only the dirs its job names (`runtime/hostdirs.py`, at launch,
as the tenant's uid), so even a world-readable file of one tenant is out of another tenant's
reach.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import PurePosixPath

from gpuyard.model import Tenant

log = logging.getLogger("gpuyard.api")

SYSTEM_DIRS = frozenset(
    {
        "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32",
        "/media", "/mnt", "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp",
        "/usr", "/var", "/var/tmp", "/var/lib", "/var/log",
    }
)
# trees a task without an image sees (runtime/rootfs.py HOST_VIEW) or the kernel owns
SYSTEM_TREES = (
    "/proc", "/sys", "/dev", "/run", "/boot",
    "/etc", "/usr", "/opt", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
)


def _nested(a: str, b: str) -> bool:
    pa, pb = PurePosixPath(a), PurePosixPath(b)
    return pa == pb or pa in pb.parents or pb in pa.parents


def root_errors(tenant: Tenant, others: Iterable[Tenant]) -> list[tuple[str, str]]:
    """(field path, message) for each root that is a system dir or overlaps another tenant's."""
    errors = []
    others = [t for t in others if t.name != tenant.name]
    for i, root in enumerate(tenant.storage_roots):
        field = f"storageRoots[{i}]"
        if root in SYSTEM_DIRS or any(PurePosixPath(t) in PurePosixPath(root).parents
                                      or root == t for t in SYSTEM_TREES):
            errors.append((field, f"{root} is a system dir of the host; give a dir of its own"))
            continue
        for other in others:
            clash = next((r for r in other.storage_roots if _nested(root, r)), None)
            if clash is not None:
                errors.append(
                    (field, f"{root} overlaps {clash}, a storage root of tenant {other.name}")
                )
    return errors


def prepare_roots(tenant: Tenant) -> None:
    """Make each missing root (and hand over each empty one) to the tenant: uid:gid, 0700."""
    if tenant.uid is None:
        return
    for root in tenant.storage_roots:
        try:
            _prepare(root, tenant.uid)
        except OSError as e:
            log.warning("storage root %s of tenant %s not prepared: %s", root, tenant.name, e)


def _prepare(root: str, uid: int) -> None:
    if not os.path.lexists(root):
        os.makedirs(os.path.dirname(root), exist_ok=True)
        os.mkdir(root, 0o700)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if st.st_uid == uid and st.st_gid == uid:
            os.fchmod(fd, 0o700)
        elif not os.listdir(fd):
            os.fchown(fd, uid, uid)
            os.fchmod(fd, 0o700)
        else:
            log.warning(
                "storage root %s is not empty and belongs to uid %d (mode %o): left as it is; "
                "the tenant's tasks (uid %d) get what its modes allow",
                root, st.st_uid, st.st_mode & 0o7777, uid,
            )
    finally:
        os.close(fd)
