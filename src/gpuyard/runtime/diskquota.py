"""Quotas on what a task writes on its node: `/workspace` and an image root's upper layer.

Both are size-limited tmpfs (writes past the size fail with ENOSPC), so a task can no longer
fill the node's disk (`/workspace` once took 1.4 GB/s with no limit):

- `/workspace`: a tmpfs the OCI runtime mounts in the container (`workspace_mount`), owned
  by the task's user, mode 0700;
- an image task's copy-on-write root: the overlay's upper and work dirs live on a *detached*
  tmpfs (`detached_tmpfs`: fsopen/fsconfig/fsmount, never attached to any path), which the
  overlay holds by reference; unmounting the overlay frees it, so there is nothing more to
  clean up (`overlay.mount_overlay`).

tmpfs pages are charged to the memory cgroup of the process that writes them, i.e. the task:
what a task keeps in `/workspace` or in its root counts against its memory limit, like its
`/tmp` and `/dev/shm` already did. The quota (`quota_mb`) is the tenant's `workspaceMB`, by
default the task's memory limit (a larger tmpfs could not be filled anyway); `0` is no quota,
for tenants a platform admin trusts with the node's disk (`/workspace` is then the task dir's
`work/`, and the upper layer the task dir's `upper/`). Why not XFS project quotas (the state
root is ext4 here, and most nodes' are) or a loop-mounted file system per task (mkfs + mount
cost ~25 ms, more than a whole `crun run`): docs/runtime.md, *Disk quotas*.
"""

from __future__ import annotations

import ctypes
import os

from gpuyard.runtime.env import WORKDIR
from gpuyard.runtime.rootfs import Mount
from gpuyard.runtime.types import TaskLaunch

FSOPEN_CLOEXEC = 1
FSMOUNT_CLOEXEC = 1
FSCONFIG_SET_STRING = 1
FSCONFIG_CMD_CREATE = 6
MOUNT_ATTR_NOSUID = 0x02
MOUNT_ATTR_NODEV = 0x04
_libc = ctypes.CDLL(None, use_errno=True)


def quota_mb(launch: TaskLaunch) -> int:
    """The size of the task's `/workspace` and of its image root's writes, in MiB (0: none)."""
    return launch.memory_mb if launch.workspace_mb is None else launch.workspace_mb


def workspace_mount(launch: TaskLaunch, uid: int, gid: int) -> Mount | None:
    """The task's `/workspace`: a tmpfs of its quota owned by `uid`:`gid` (None: no quota)."""
    size = quota_mb(launch)
    if size <= 0:
        return None
    options = ["nosuid", "nodev", f"size={size}m", "mode=0700", f"uid={uid}", f"gid={gid}"]
    return {"destination": WORKDIR, "type": "tmpfs", "source": "tmpfs", "options": options}


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"cannot make a tmpfs ({what}): {os.strerror(err)}")
    return result


def detached_tmpfs(size_mb: int) -> int:
    """A new tmpfs of `size_mb` MiB, mounted nowhere: an fd of its root (O_PATH, close-on-exec).

    Reach it as `/proc/<pid>/fd/<fd>`; it lives while the fd or a mount using it (an
    overlay's upper dir) does.
    """
    fs = _check(_libc.fsopen(b"tmpfs", FSOPEN_CLOEXEC), "fsopen")
    try:
        _check(_libc.fsconfig(fs, FSCONFIG_SET_STRING, b"size", f"{size_mb}m".encode(), 0), "size")
        _check(_libc.fsconfig(fs, FSCONFIG_SET_STRING, b"mode", b"0755", 0), "mode")
        _check(_libc.fsconfig(fs, FSCONFIG_CMD_CREATE, None, None, 0), "create")
        attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV
        return _check(_libc.fsmount(fs, FSMOUNT_CLOEXEC, attrs), "fsmount")
    finally:
        os.close(fs)
