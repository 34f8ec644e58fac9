"""User namespaces: a task is root in its container and its tenant's uid on the host.

Each tenant owns a block of 65,536 host ids (`model/tenant.py`). A task of a tenant without
`allowRoot` runs in a user namespace that maps container ids 0–65,535 onto that block, so the
container's root is the tenant's first id on the host, and an id `u` an image uses (`_apt`,
`jovyan`) is the block's `base + u`: OpenPAI's and Docker's "root in the container" (apt-get
install, pip install system-wide, chown) without being root, or any other tenant, on the host.
Capabilities are the container root's within its own namespace only: over the host, the
node's network or another tenant's files it has none.

Image roots are owned by host root (the node unpacked them). Seen from a namespace mapped
elsewhere, they would belong to nobody and be read-only even to the container's root. So the
overlay's lower layer is an *idmapped* clone of the unpacked image (`idmapped_clone`: Linux
5.19+ for overlay over an idmapped layer; the clone is detached as soon as the overlay holds
it), which shows host id `x` as `base + x`: the image's root-owned files are the container
root's, its writes land in the task's upper dir owned by the tenant's block, and the shared
unpacked image is never written.

Where the node cannot (a kernel or a filesystem without idmapped mounts, probed by
`overlay.userns_problem`), tasks run without a namespace: as the tenant's uid, not root
(logged once).
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuyard.runtime.errors import LaunchInvalid
from gpuyard.runtime.imageconfig import ImageConfig
from gpuyard.runtime.types import TaskLaunch

ID_BLOCK = 1 << 16  # ids mapped per tenant (model.tenant.TENANT_ID_BLOCK)
ROOTS = Path("/run/gpuyard/roots")  # mapped tasks' roots are mounted below (mapped_root_point)
USERNS_ENV = "GPUYARD_USERNS"  # "0": never (a node admin's choice)
SYS_OPEN_TREE, SYS_MOVE_MOUNT, SYS_MOUNT_SETATTR = 428, 429, 442  # the unified syscall table
OPEN_TREE_CLONE = 1
AT_FDCWD = -100
AT_EMPTY_PATH = 0x1000
AT_RECURSIVE = 0x8000
MOUNT_ATTR_IDMAP = 0x00100000
MOVE_MOUNT_F_EMPTY_PATH = 0x4
_libc = ctypes.CDLL(None, use_errno=True)


class MountAttr(ctypes.Structure):
    """mount_setattr(2)'s `struct mount_attr`."""

    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


@dataclass(frozen=True, slots=True)
class TaskIds:
    """Who a task's processes are: in the container, and on the host."""

    uid: int
    gid: int
    host_uid: int
    host_gid: int
    base: int | None = None  # host id of container id 0 (None: no user namespace)

    def oci_mappings(self) -> dict[str, Any]:
        """The config's `linux` entries for the namespace (nothing without one)."""
        if self.base is None:
            return {}
        mapping = [{"containerID": 0, "hostID": self.base, "size": ID_BLOCK}]
        return {"uidMappings": mapping, "gidMappings": list(mapping)}


def task_ids(launch: TaskLaunch, image: ImageConfig | None, userns: bool) -> TaskIds:
    """The task's ids: with a namespace (`userns`, an image root, and the launch carries its
    tenant's block), the image's user or root, mapped onto the block; else the launch's
    `run_as` (the image's user only where that is root, as before namespaces). A task on the
    host's root has none: that root is read-only and host root's, root in it gains nothing."""
    if userns and image is not None and launch.userns_base is not None:
        uid, gid = image.user or (0, 0)
        if uid >= ID_BLOCK or gid >= ID_BLOCK:
            raise LaunchInvalid(
                f"image {launch.image!r} runs as {uid}:{gid}; a task's ids must be below "
                f"{ID_BLOCK} (its user namespace maps {ID_BLOCK} ids)"
            )
        base = launch.userns_base
        return TaskIds(uid, gid, base + uid, base + gid, base)
    uid, gid = launch.run_as
    if image is not None and image.user is not None and launch.run_as == (0, 0):
        uid, gid = image.user
    return TaskIds(uid, gid, uid, gid)


class _Namespaces:
    """An fd of a user namespace per id block (made once per process, kept open: an idmapped
    mount needs one, and making one costs a process)."""

    def __init__(self) -> None:
        self._fds: dict[int, int] = {}
        self._lock = threading.Lock()

    def fd(self, base: int) -> int:
        with self._lock:
            if base not in self._fds:
                self._fds[base] = _make_userns(base)
            return self._fds[base]


_namespaces = _Namespaces()


def _make_userns(base: int) -> int:
    """A user namespace mapping 0–65,535 onto `base`: one held by a short-lived `cat`."""
    holder = subprocess.Popen(["unshare", "--user", "--", "cat"], stdin=subprocess.PIPE,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    try:
        ours = os.readlink("/proc/self/ns/user")
        deadline = time.monotonic() + 10
        while os.readlink(f"/proc/{holder.pid}/ns/user") == ours:
            if holder.poll() is not None or time.monotonic() > deadline:
                err = holder.stderr.read().decode(errors="replace") if holder.stderr else ""
                raise OSError(f"cannot make a user namespace: {err.strip() or 'timed out'}")
            time.sleep(0.001)
        for kind in ("uid_map", "gid_map"):
            Path(f"/proc/{holder.pid}/{kind}").write_text(f"0 {base} {ID_BLOCK}\n")
        return os.open(f"/proc/{holder.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        if holder.stdin is not None:
            holder.stdin.close()
        holder.wait(timeout=10)
        if holder.stderr is not None:
            holder.stderr.close()


def _check(res: int, what: str, path: Path) -> int:
    if res < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"cannot {what} {path}: {os.strerror(err)}")
    return res


def idmapped_clone(source: Path, target: Path, base: int) -> None:
    """Mount a clone of `source` (and what is mounted below it) at `target`, showing host id
    x as `base + x` (open_tree → mount_setattr(MOUNT_ATTR_IDMAP) → move_mount)."""
    flags = OPEN_TREE_CLONE | os.O_CLOEXEC | AT_RECURSIVE
    fd = _check(_libc.syscall(SYS_OPEN_TREE, AT_FDCWD, str(source).encode(), flags),
                "clone the mount of", source)  # fmt: skip
    try:
        attr = MountAttr(MOUNT_ATTR_IDMAP, 0, 0, _namespaces.fd(base))
        _check(_libc.syscall(SYS_MOUNT_SETATTR, fd, b"", AT_EMPTY_PATH | AT_RECURSIVE,
                             ctypes.byref(attr), ctypes.sizeof(attr)), "idmap", source)  # fmt: skip
        _check(_libc.syscall(SYS_MOVE_MOUNT, fd, b"", AT_FDCWD, str(target).encode(),
                             MOVE_MOUNT_F_EMPTY_PATH), "mount an idmapped", target)  # fmt: skip
    finally:
        os.close(fd)


def _node_roots(state_root: Path) -> Path:
    """Where a node's mapped task roots are mounted: `ROOTS/<its state root's hash>`."""
    digest = hashlib.sha256(str(state_root.resolve()).encode()).hexdigest()[:16]
    return ROOTS / digest


def _dir(path: Path, mode: int, owner: int = 0) -> None:
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=mode)
    os.chown(path, owner, owner)
    os.chmod(path, mode)


def mapped_root_point(task_dir: Path, base: int) -> Path:
    """The dir a task in a user namespace has its root mounted on: outside the node's state
    root, which only host root may enter, on a path the container's root may walk and no
    other tenant or host user may (`ROOTS` 0711 → node 0711 → the tenant's dir 0700, owned
    by its block's first id → the task's key). `task_dir` is `<state root>/tasks/<key>`."""
    node = _node_roots(task_dir.parent.parent)
    for path in (ROOTS.parent, ROOTS, node):
        _dir(path, 0o711)
    tenant = node / str(base)
    _dir(tenant, 0o700, base)
    point = tenant / task_dir.name
    point.mkdir(exist_ok=True)
    return point


def mapped_roots(state_root: Path, key: str | None = None) -> list[Path]:
    """A node's mapped task root dirs (of task `key` only, if given)."""
    node = _node_roots(state_root)
    try:
        tenants = [node / name for name in os.listdir(node)]
    except FileNotFoundError:
        return []
    out = []
    for tenant in tenants:
        with contextlib.suppress(OSError):
            out += [tenant / k for k in os.listdir(tenant) if key is None or k == key]
    return out
