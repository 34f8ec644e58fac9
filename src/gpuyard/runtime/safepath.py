"""Open a directory beneath a trusted root without ever following a symlink, as a given user.

A job's `dataDir` and `outputDir` are host paths a tenant member chose, inside dirs that the
tenant's own tasks can write. Checking them with `realpath()` at submit and mounting the path
at launch leaves a window: a task swaps a component for a symlink (`ln -s /etc out/evil`) and
the next launch follows it as root. Here the path is walked from an fd of the trusted root one
component at a time with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` (Linux ≥ 5.6), or
`openat(O_NOFOLLOW)` where `openat2` is missing, and the caller mounts what was opened
(`/proc/self/fd/N`), so a swap after the walk changes nothing.

The walk runs in a thread of its own whose filesystem identity is the task's (`setfsuid`,
`setfsgid`, no supplementary groups: per thread, raw syscalls, so the rest of the process keeps
root), so a missing `outputDir` is created as the task's user and a dir the task's user could
not enter is refused. Refusals are `PathRefused` (the spec asked for something that cannot be
mounted: never worth a retry); other `OSError`s (EIO, EMFILE, ...) pass through.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import platform
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

SYS_OPENAT2 = 437  # the same number on every architecture (the unified syscall table)
SYS_SETGROUPS = {"x86_64": 116, "aarch64": 159}.get(platform.machine())
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
DIR_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
NEW_DIR_MODE = 0o750
NAME_MAX = 255

_libc = ctypes.CDLL(None, use_errno=True)


class PathRefused(Exception):
    """The path cannot be used as asked; `str()` names only the caller's own path."""


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def _openat2(dir_fd: int, name: str) -> int:
    resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS
    how = _OpenHow(DIR_FLAGS | os.O_NOFOLLOW, 0, resolve)
    fd = _libc.syscall(SYS_OPENAT2, dir_fd, name.encode(), ctypes.byref(how), ctypes.sizeof(how))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return int(fd)


def _openat_nofollow(dir_fd: int, name: str) -> int:
    return os.open(name, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=dir_fd)


def _pick_opener() -> Callable[[int, str], int]:
    """openat2 where the kernel has it (probed once on `/`), else the O_NOFOLLOW walk."""
    root = os.open("/", DIR_FLAGS)
    try:
        os.close(_openat2(root, "."))
        return _openat2
    except OSError as e:
        if e.errno in (errno.ENOSYS, errno.EPERM):  # no openat2, or a seccomp filter said no
            return _openat_nofollow
        return _openat2
    finally:
        os.close(root)


_open_component = _pick_opener()


@dataclass(frozen=True, slots=True)
class Walk:
    """Open `parts` beneath `root_fd` (a trusted dir) as `uid`:`gid`; `create` makes missing
    components (as that user)."""

    root_fd: int
    parts: Sequence[str]
    uid: int
    gid: int
    create: bool

    def run(self) -> int:
        fd = os.dup(self.root_fd)
        try:
            for i, name in enumerate(self.parts):
                nxt = self._step(fd, name, i)
                os.close(fd)
                fd = nxt
            return fd
        except BaseException:
            os.close(fd)
            raise

    def _step(self, fd: int, name: str, i: int) -> int:
        if name in ("", ".", "..") or "\0" in name or len(name.encode()) > NAME_MAX:
            raise PathRefused(f"{self._shown(i)}: not a plain path component")
        try:
            return _open_component(fd, name)
        except FileNotFoundError:
            if not self.create:
                raise PathRefused(f"{self._shown(i)} does not exist") from None
        except OSError as e:
            raise self._refusal(e, fd, name, i) from None
        try:
            with contextlib.suppress(FileExistsError):  # a sibling task made it first
                os.mkdir(name, NEW_DIR_MODE, dir_fd=fd)
        except OSError as e:
            raise self._refusal(e, fd, name, i) from None
        try:
            return _open_component(fd, name)
        except OSError as e:
            raise self._refusal(e, fd, name, i) from None

    def _refusal(self, e: OSError, fd: int, name: str, i: int) -> Exception:
        shown = self._shown(i)
        if e.errno in (errno.ELOOP, errno.ENOTDIR) and _is_symlink(fd, name):
            return PathRefused(f"{shown} is a symbolic link; links are not followed")
        words = {
            errno.ENOTDIR: "is not a directory",
            errno.ELOOP: "is a symbolic link; links are not followed",
            errno.EACCES: "may not be entered or created by the task's user",
            errno.EPERM: "may not be entered or created by the task's user",
            errno.ENAMETOOLONG: "is too long",
            errno.EXDEV: "leads outside its storage root",
            errno.EROFS: "is on a read-only filesystem",
            errno.EDQUOT: "cannot be created: the disk quota is exceeded",
        }
        if e.errno in words:
            return PathRefused(f"{shown} {words[e.errno]}")
        return e  # the node's trouble (EIO, EMFILE, ENOSPC...), not the spec's

    def _shown(self, i: int) -> str:
        return "component " + repr("/".join(self.parts[: i + 1]))


def _is_symlink(dir_fd: int, name: str) -> bool:
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return False
    return (st.st_mode & 0o170000) == 0o120000


def _become(uid: int, gid: int) -> None:
    """This thread's filesystem identity (and nothing else) becomes uid:gid, no groups."""
    if SYS_SETGROUPS is not None and _libc.syscall(SYS_SETGROUPS, 0, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setgroups: {os.strerror(err)}")
    _libc.setfsgid(gid)
    _libc.setfsuid(uid)
    if _libc.setfsuid(-1) != uid or _libc.setfsgid(-1) != gid:  # -1: only asks
        raise OSError(errno.EPERM, f"could not take the identity {uid}:{gid}")


def open_beneath(
    root_fd: int, parts: Sequence[str], uid: int, gid: int, create: bool = False
) -> int:
    """An O_PATH fd of `root/parts...`, opened as uid:gid without following any symlink.

    Runs the walk in a short-lived thread (its identity dies with it); PathRefused when the
    path cannot be used, OSError for the node's own trouble.
    """
    walk = Walk(root_fd, tuple(parts), uid, gid, create)
    result: list[int | BaseException] = []

    def run() -> None:
        try:
            if (uid, gid) != (os.geteuid(), os.getegid()):
                _become(uid, gid)
            result.append(walk.run())
        except BaseException as e:  # handed to the caller's thread
            result.append(e)

    thread = threading.Thread(target=run, name="gpuyard-openbeneath", daemon=True)
    thread.start()
    thread.join()
    out = result[0]
    if isinstance(out, BaseException):
        raise out
    return out
