"""A task's host dirs (`dataDir` at /data, `outputDir` at /output, and its tenant's named
`storage` at their mount points), checked and pinned at launch.

What the submit-time check saw may have changed by the time a task starts: roots were edited,
or a task of the same tenant swapped a path component for a symlink. So on the node, at
launch:

1. the path must lie (lexically) under one of the tenant's storage roots carried by the launch,
   and must neither be, hold nor lie in the node's state root (the platform's data);
2. it is walked from an fd of that root without following symlinks, as the task's user
   (`safepath.open_beneath`); a missing `outputDir` is created as that user;
3. what was opened is bind-mounted (`mount("/proc/self/fd/N", ...)`) onto
   `<task dir>/mnt/<data|output>`, and the container config binds from there, so a swap after
   the walk changes nothing.

These *pins* are host mounts of users' data inside the platform's state dir, so they are made
harmless and short-lived: private (no propagation), recursively read-only on the host side
(a recursive delete of the state dir that walks into one removes nothing: EROFS; the
container's own bind is made writable by its runtime), and unmounted by the supervisor as soon
as `<rt> create` has copied them into the container's mount namespace. `release_task_mounts`
(at the task's end or removal) and `sweep_stale_mounts` (when a node starts) undo any left.

A refusal is `LaunchInvalid` (InvalidSpec, never retried) naming only the user's own path.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from gpuyard.model.storage import mount_point_problem, overlapping
from gpuyard.runtime.errors import LaunchInvalid
from gpuyard.runtime.overlay import MAPPED, MERGED, mounted_under, unmount
from gpuyard.runtime.safepath import DIR_FLAGS, PathRefused, open_beneath
from gpuyard.runtime.types import TaskLaunch
from gpuyard.runtime.userns import SYS_MOUNT_SETATTR, MountAttr, mapped_roots

MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
MOUNT_ATTR_RDONLY = 0x1
AT_RECURSIVE = 0x8000
MOUNTS_DIR = "mnt"
PIN_NAMES = ("data", "output")
STORAGE_PIN = "storage-"  # + the storage's name: its pin under <task dir>/mnt
_libc = ctypes.CDLL(None, use_errno=True)


@dataclass(frozen=True, slots=True)
class HostDir:
    field: str  # dataDir | outputDir | storage.NAME
    path: str  # as the spec gave it
    create: bool  # outputDir: made if missing
    name: str  # its pin under <task dir>/mnt
    writable: bool = False  # bound read-write into the container


def host_dirs(launch: TaskLaunch) -> list[HostDir]:
    out = []
    if launch.data_dir:
        out.append(HostDir("dataDir", launch.data_dir, False, "data"))
    if launch.output_dir:
        out.append(HostDir("outputDir", launch.output_dir, True, "output", writable=True))
    for m in launch.storage:  # an admin's dir: never made here
        name = STORAGE_PIN + m.name
        out.append(HostDir(storage_field(m.name), m.path, False, name, not m.read_only))
    return out


def storage_field(name: str) -> str:
    """The pinned-dirs key of the named storage `name` (`storage.NAME`)."""
    return f"storage.{name}"


def root_of(path: str, roots: Sequence[str]) -> tuple[str, tuple[str, ...]] | None:
    """The storage root that lexically holds `path` (the deepest one), and the parts below it."""
    p = PurePosixPath(path)
    if not p.is_absolute() or ".." in p.parts:
        return None
    best: tuple[str, tuple[str, ...]] | None = None
    for root in roots:
        r = PurePosixPath(os.path.normpath(root))
        if p == r or r in p.parents:
            parts = p.parts[len(r.parts) :]
            if best is None or len(parts) < len(best[1]):
                best = (str(r), parts)
    return best


def _overlaps(path: str, private: Path) -> bool:
    """Whether mounting `path` would show `private` (the node's state root) or sit inside it."""
    p, q = PurePosixPath(os.path.normpath(path)), PurePosixPath(private)
    return p == q or q in p.parents or p in q.parents


def pin(d: HostDir, launch: TaskLaunch, private: Path) -> int:
    """An O_PATH fd of the dir, walked beneath its storage root as the task's user."""
    found = root_of(d.path, launch.storage_roots)
    if found is None:
        raise LaunchInvalid(
            f"{d.field} {d.path} is not under a storage root of the job's tenant (any more)"
        )
    if _overlaps(d.path, private):
        raise LaunchInvalid(f"{d.field} {d.path} holds or lies in the platform's own data")
    root, parts = found
    try:
        root_fd = os.open(root, DIR_FLAGS)
    except OSError as e:
        raise LaunchInvalid(f"{d.field}: its storage root cannot be opened: {e.strerror}") from e
    try:
        uid, gid = launch.run_as
        return open_beneath(root_fd, parts, uid, gid, create=d.create)
    except PathRefused as e:
        raise LaunchInvalid(f"{d.field} {d.path}: {e}") from e
    finally:
        os.close(root_fd)


def _fail(what: str, target: Path) -> OSError:
    err = ctypes.get_errno()
    return OSError(err, f"cannot {what} {target}: {os.strerror(err)}")


def bind_fd(fd: int, target: Path, read_only: bool = True) -> None:
    """Bind what `fd` is (not what a path now names) onto `target`: private, read-only here
    unless told otherwise."""
    source, dest = f"/proc/self/fd/{fd}".encode(), str(target).encode()
    if _libc.mount(source, dest, None, MS_BIND | MS_REC, None) != 0:
        raise _fail("bind", target)
    attr = MountAttr(MOUNT_ATTR_RDONLY if read_only else 0, 0, MS_PRIVATE, 0)
    done = _libc.syscall(
        SYS_MOUNT_SETATTR, -100, dest, AT_RECURSIVE, ctypes.byref(attr), ctypes.sizeof(attr)
    )
    if done != 0:
        error = _fail("make read-only", target)
        unmount(target)
        raise error


def check_mount_points(launch: TaskLaunch) -> None:
    """The named storage's mount points: each below /mnt, none hiding another."""
    for m in launch.storage:
        if (problem := mount_point_problem(m.mount_point)) is not None:
            raise LaunchInvalid(f"storage {m.name}: its mount point {m.mount_point} {problem}")
    if (clash := overlapping([m.mount_point for m in launch.storage])) is not None:
        raise LaunchInvalid(f"storage mount points {clash[0]} and {clash[1]} overlap")


def mount_host_dirs(launch: TaskLaunch, task_dir: Path, private: Path,
                    mapped: bool = False) -> dict[str, str]:  # fmt: skip
    """Check, open and pin each host dir; field → the pinned path to bind into the container.
    For a task in a user namespace (`mapped`), a writable dir's pin is not read-only here:
    the container's namespace could not lift that flag (it is locked there), and the pin
    lives only until `<rt> create` has bound it (`release_pins`)."""
    check_mount_points(launch)
    pinned: dict[str, str] = {}
    for d in host_dirs(launch):
        fd = pin(d, launch, private)
        try:
            target = task_dir / MOUNTS_DIR / d.name
            target.mkdir(parents=True, exist_ok=True)
            bind_fd(fd, target, read_only=not (mapped and d.writable))
            pinned[d.field] = str(target)
        finally:
            os.close(fd)
    return pinned


def release_pins(task_dir: Path) -> None:
    """Unmount the task's pins (once its container holds its own copies); idempotent."""
    names = list(PIN_NAMES)
    with contextlib.suppress(OSError):
        names += [n for n in os.listdir(task_dir / MOUNTS_DIR) if n.startswith(STORAGE_PIN)]
    for name in names:
        unmount(task_dir / MOUNTS_DIR / name)


def release_task_mounts(task_dir: Path) -> None:
    """Unmount the task's pins and its overlay root, if any (idempotent)."""
    release_pins(task_dir)
    unmount(task_dir / MERGED)
    unmount(task_dir / MAPPED)  # an idmapped image clone a crash left mounted (userns.py)
    for point in mapped_roots(task_dir.parent.parent, task_dir.name):  # userns.py
        _release_point(point)


def _release_point(point: Path) -> bool:
    """Unmount a mapped task root and remove its dir; whether something was mounted."""
    undone = unmount(point)
    with contextlib.suppress(OSError):
        point.rmdir()
    return undone


def remove_unmounted(task_dir: Path) -> None:
    """Delete a task dir, never through a mount: a user's output dir must not be emptied
    because an unmount did not take (OSError then, and the dir stays)."""
    if not task_dir.exists():
        return
    if mounted_under(task_dir):
        raise OSError(f"{task_dir} still has mounts under it; not deleted")
    shutil.rmtree(task_dir)


def sweep_stale_mounts(tasks_dir: Path, live: set[str]) -> list[Path]:
    """Unmount what task dirs whose task is not live still have mounted; the points undone."""
    undone = []
    for point in mounted_under(tasks_dir):
        rel = point.relative_to(tasks_dir.resolve())
        ours = point.name in (MERGED, MAPPED) or point.parent.name == MOUNTS_DIR
        if rel.parts and rel.parts[0] not in live and ours:
            with contextlib.suppress(OSError):
                if unmount(point):
                    undone.append(point)
    for point in mapped_roots(tasks_dir.parent):
        if point.name not in live:
            with contextlib.suppress(OSError):
                if _release_point(point):
                    undone.append(point)
    return undone
