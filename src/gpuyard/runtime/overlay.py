"""Copy-on-write task roots: a kernel overlay (lower = an image's unpacked root, upper and work
dirs on a detached tmpfs of the task's quota, `diskquota.py`, or without a quota in the task's
state dir), mounted at `<task_dir>/rootfs` in the host's mount namespace.

The mount is made by `ContainerRuntime.start`, undone by the supervisor once the container is
deleted, again (idempotently) by `remove()`, and by `hostdirs.sweep_stale_mounts` when a node
starts (a server or supervisor that crashed leaves no mount behind for good). Where the kernel
overlay cannot be mounted (an unprivileged nested container), `fuse-overlayfs` (Debian
package) is used if installed; there is no silent fallback to copying the image.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from gpuyard.runtime.diskquota import detached_tmpfs
from gpuyard.runtime.errors import ImageError
from gpuyard.runtime.imageconfig import ImageConfig
from gpuyard.runtime.rootfs import Rootfs, tmpfs
from gpuyard.runtime.userns import idmapped_clone, mapped_root_point

MNT_DETACH = 2
MERGED, UPPER, WORK = "rootfs", "upper", "ovwork"
MAPPED = "lower"  # the idmapped clone of the image, until the overlay holds it
_libc = ctypes.CDLL(None, use_errno=True)


@dataclass(frozen=True, slots=True)
class OverlayDirs:
    merged: Path
    upper: Path
    work: Path

    @classmethod
    def of(cls, task_dir: Path) -> OverlayDirs:
        return cls(task_dir / MERGED, task_dir / UPPER, task_dir / WORK)


def _options(lower: Path, dirs: OverlayDirs) -> str:
    for p in (lower, dirs.upper, dirs.work):
        if re.search(r"[,:\s]", str(p)):
            raise ImageError(f"overlay dir {p} holds a ',', ':' or a space")
    return f"lowerdir={lower},upperdir={dirs.upper},workdir={dirs.work}"


def _kernel_mount(options: str, target: Path) -> int:
    """mount(2) of a kernel overlay; 0 or the errno."""
    res = _libc.mount(b"overlay", str(target).encode(), b"overlay", 0, options.encode())
    return 0 if res == 0 else ctypes.get_errno()


def _fuse_mount(options: str, target: Path) -> None:
    try:
        subprocess.run(
            ["fuse-overlayfs", "-o", options, str(target)],
            capture_output=True,
            timeout=30,
            check=True,
        )
    except FileNotFoundError:
        raise ImageError(
            "the kernel refused an overlay mount here and fuse-overlayfs is not installed"
        ) from None
    except subprocess.CalledProcessError as e:
        raise ImageError(f"fuse-overlayfs failed: {e.stderr.decode(errors='replace')}") from e


def mount_overlay(lower: Path, task_dir: Path, upper_mb: int = 0,
                  id_base: int | None = None) -> OverlayDirs:  # fmt: skip
    """Mount the task's copy-on-write root over `lower`; its dirs. With `upper_mb`, the upper
    and work dirs are on a detached tmpfs of that size (`diskquota.py`): the root's writes
    fail with ENOSPC beyond it, and the tmpfs goes when the overlay is unmounted. With
    `id_base`, the lower layer is an idmapped clone of `lower` showing host id x as
    `id_base + x` (`userns.py`), detached once the overlay holds it."""
    dirs = OverlayDirs.of(task_dir)
    if id_base is not None:  # mounted where the container's root may reach it (userns.py)
        dirs = OverlayDirs(mapped_root_point(task_dir, id_base), dirs.upper, dirs.work)
        mapped = task_dir / MAPPED
        mapped.mkdir(exist_ok=True)
        try:
            idmapped_clone(lower, mapped, id_base)
        except OSError as e:
            raise ImageError(f"cannot map the image's ids for {task_dir.name}: {e}") from e
        try:
            return _mount_overlay(mapped, dirs, task_dir, upper_mb, id_base)
        finally:
            unmount(mapped)  # the overlay keeps its own reference to its layers
    return _mount_overlay(lower, dirs, task_dir, upper_mb, None)


def _mount_overlay(lower: Path, dirs: OverlayDirs, task_dir: Path, upper_mb: int,
                   id_base: int | None) -> OverlayDirs:  # fmt: skip
    quota = detached_tmpfs(upper_mb) if upper_mb > 0 else None
    try:
        if quota is not None:  # a path to it for as long as this fd is open
            on_quota = Path(f"/proc/{os.getpid()}/fd/{quota}")
            dirs = OverlayDirs(dirs.merged, on_quota / UPPER, on_quota / WORK)
        for d in (dirs.merged, dirs.upper, dirs.work):
            d.mkdir(exist_ok=True)
        if id_base is not None:  # the root dir is the upper's: the container root's
            os.chown(dirs.upper, id_base, id_base)
        fuse = id_base is None  # fuse-overlayfs knows no idmapped layer
        options = _options(lower, dirs)
        err = _kernel_mount(options, dirs.merged)
        if fuse and err in (errno.EPERM, errno.ENODEV, errno.EINVAL):
            _fuse_mount(options, dirs.merged)  # e.g. an unprivileged nested container
        elif err:
            raise ImageError(
                f"cannot mount the overlay root of {task_dir.name}: {os.strerror(err)}"
            )
    finally:
        if quota is not None:
            os.close(quota)  # the overlay holds the tmpfs now
    return dirs


def unmount(target: Path) -> bool:
    """Lazily unmount `target` if something is mounted there; whether it was."""
    if _libc.umount2(str(target).encode(), MNT_DETACH) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOENT):  # not a mount point (any more)
        return False
    raise OSError(err, f"cannot unmount {target}: {os.strerror(err)}")


def overlay_root(lower: Path, task_dir: Path, config: ImageConfig, upper_mb: int = 0,
                 id_base: int | None = None) -> Rootfs:  # fmt: skip
    """Mount the overlay and describe it as the container's writable root (its writes on a
    tmpfs of `upper_mb` MiB, if given; its ids mapped onto `id_base`, if given)."""
    dirs = mount_overlay(lower, task_dir, upper_mb, id_base)
    if config.workdir:
        _make_workdir(dirs.merged, config.workdir, id_base)
    return Rootfs(dirs.merged, readonly=False, mounts=(tmpfs("/tmp", "mode=1777"),), image=config)


def _make_workdir(root: Path, workdir: str, id_base: int | None) -> None:
    """As Docker: a missing WorkingDir is created, root's (the container's root: `id_base`).
    Never through a link or `..` of the image (it could point at the host's dirs: the root is
    not yet the container's): such a dir is left to the container's runtime, inside it."""
    path, made = root, []
    for part in Path(workdir.lstrip("/")).parts:
        path = path / part
        if part == ".." or path.is_symlink():
            break
        with contextlib.suppress(FileExistsError):
            path.mkdir()
            made.append(path)
    if id_base is not None:
        for d in made:
            os.chown(d, id_base, id_base)


def mounted_under(directory: Path, mountinfo: Path = Path("/proc/self/mountinfo")) -> list[Path]:
    """Mount points below `directory` (deepest first)."""
    prefix = str(directory.resolve()) + "/"
    found = []
    for line in mountinfo.read_text().splitlines():
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), line.split()[4])
        if point.startswith(prefix):
            found.append(Path(point))
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


_problems: dict[int, str | None] = {}
_problems_lock = threading.Lock()


def userns_problem(images_dir: Path) -> str | None:
    """Why this node cannot run tasks in user namespaces over images kept in `images_dir`
    (None: it can). Tried once per filesystem and process: an idmapped clone of a dir there
    (`userns.idmapped_clone`) and an overlay over the clone."""
    device = images_dir.stat().st_dev
    with _problems_lock:
        if device not in _problems:
            _problems[device] = _try_idmapped_overlay(images_dir)
        return _problems[device]


def _try_idmapped_overlay(images_dir: Path) -> str | None:
    with tempfile.TemporaryDirectory(dir=images_dir, prefix=".userns-probe-") as tmp:
        lower, mapped = Path(tmp) / "l", Path(tmp) / "m"
        dirs = OverlayDirs.of(Path(tmp))
        for d in (lower, mapped, dirs.merged, dirs.upper, dirs.work):
            d.mkdir()
        try:
            idmapped_clone(lower, mapped, 1 << 30)
        except OSError as e:
            return f"no idmapped mounts here ({e})"
        try:
            err = _kernel_mount(_options(mapped, dirs), dirs.merged)
            if err:
                return f"no overlay over an idmapped layer here ({os.strerror(err)})"
            unmount(dirs.merged)
        finally:
            unmount(mapped)
    return None
