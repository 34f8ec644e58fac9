"""A task's log with a cap: what the container prints, moved from a pipe into
`<task dir>/log`, keeping its head and its tail.

The supervisor owns the read end of the pipe the container's stdout and stderr go to, and
pumps it into the log (`CappedLog.pump`: splice(2), no copy through user space). The log
never grows past `limit` bytes: while it is below, output is appended; when the next bytes
would not fit, the middle is cut out, so the log keeps the first `head` bytes (10 % of the
limit) and the latest output after them, with a marker block in between:

    [gpuyard: 123456789 bytes of this task's output were dropped here; ...]

The cut is `fallocate(FALLOC_FL_COLLAPSE_RANGE)` (ext4, XFS: metadata only, block-aligned; the
marker is one block, padded with spaces), else a copy of head + tail into a new file renamed
over the log. It leaves `slack` bytes of room (1/16 of the limit), so the tail kept is between
`limit - head - block - slack` and `limit - head - block` bytes. How many bytes were dropped is
also in `<log>.dropped` (JSON, next to the log and archived with it), which the log API and the
portal read (`dropped_bytes`). The log stays readable while the task runs; a reader that
follows it past a cut misses what was cut, as it would have been dropped anyway.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import json
import os
import select
import time
from pathlib import Path

from gpuyard.runtime.taskdir import write_json

MIB = 1 << 20
DEFAULT_LIMIT_MB = 100
MIN_LIMIT = MIB
HEAD_PERCENT = 10
CHUNK = MIB  # at most this much per pump call
PIPE_SIZE = MIB  # the pipe's buffer (fs.pipe-max-size is 1 MiB by default)
PUMP_BUDGET = 8 * MIB  # at most this much per wake-up of the supervisor
RATE = 64 * MIB  # per second at most: past it the pipe fills and the task's writes wait
FALLOC_FL_COLLAPSE_RANGE = 0x08
DROPPED_SUFFIX = ".dropped"
SPLICE_FLAGS = os.SPLICE_F_MOVE | os.SPLICE_F_NONBLOCK
_libc = ctypes.CDLL(None, use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]


def dropped_file(log: Path) -> Path:
    """`<log>.dropped`: {"droppedBytes", "headBytes", "limitBytes"} once bytes were dropped."""
    return log.with_name(log.name + DROPPED_SUFFIX)


def dropped_bytes(log: Path) -> int:
    """How many bytes of output the log `log` has dropped (0: none, or no such log)."""
    try:
        value = json.loads(dropped_file(log).read_bytes())
        return int(value["droppedBytes"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def _mib(n: int) -> str:
    return f"{n / MIB:.4g} MiB"


def _collapse(fd: int, offset: int, length: int) -> bool:
    """Cut [offset, offset + length) out of the file; False where the file system cannot."""
    if _libc.fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, offset, length) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
        return False
    raise OSError(err, f"cannot cut the log: {os.strerror(err)}")


class CappedLog:
    """The writer of one task's log (one process writes it: the task's supervisor)."""

    def __init__(self, path: Path, limit: int = DEFAULT_LIMIT_MB * MIB) -> None:
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        stat = os.fstat(self.fd)
        self.size = stat.st_size
        self.block = max(4096, stat.st_blksize)
        self.limit = max(limit, MIN_LIMIT)
        self.head = max(self.block, self.limit * HEAD_PERCENT // 100 // self.block * self.block)
        self.tail_at = self.head + self.block  # after the marker block
        self.slack = max(self.block, self.limit // 16 // self.block * self.block)
        self.dropped = dropped_bytes(path)

    def close(self) -> None:
        os.close(self.fd)

    def pump(self, src: int, most: int = CHUNK) -> int:
        """Move what the pipe `src` holds (up to `most`, CHUNK at most) into the log; bytes
        moved, 0 at end of file. BlockingIOError when a non-blocking pipe holds nothing now."""
        if self.size >= self.limit:
            self._cut()
        count = min(most, CHUNK, self.limit - self.size)
        try:
            moved = os.splice(src, self.fd, count, offset_dst=self.size, flags=SPLICE_FLAGS)
        except OSError as e:
            if e.errno != errno.EINVAL:  # EINVAL: a file system without splice
                raise
            data = os.read(src, count)
            moved = os.pwrite(self.fd, data, self.size) if data else 0
        self.size += moved
        return moved

    def write(self, data: bytes) -> None:
        """Append `data` under the cap (what did not come through the pipe; tests)."""
        view = memoryview(data)
        while view:
            if self.size >= self.limit:
                self._cut()
            written = os.pwrite(self.fd, view[: self.limit - self.size], self.size)
            self.size += written
            view = view[written:]

    def _cut(self) -> None:
        """Drop the oldest output after the head, leaving `slack` bytes of room."""
        keep = self.limit - self.tail_at - self.slack
        length = (self.size - keep - self.tail_at) // self.block * self.block
        if length <= 0:
            return
        if not self.dropped:
            self.dropped = self.block  # the marker block takes the place of output bytes
        if not _collapse(self.fd, self.tail_at, length):
            self._copy_without(length)
        self.size -= length
        self.dropped += length
        os.pwrite(self.fd, self._marker(), self.head)
        write_json(
            dropped_file(self.path),
            {"droppedBytes": self.dropped, "headBytes": self.head, "limitBytes": self.limit},
        )

    def _copy_without(self, length: int) -> None:
        """`_cut` where the file system cannot collapse: head + rest into a new file."""
        tmp = self.path.with_name(f".{self.path.name}.cut")
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        src = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            _copy(src, out, 0, 0, self.tail_at)
            rest = self.size - self.tail_at - length
            _copy(src, out, self.tail_at + length, self.tail_at, rest)
            os.replace(tmp, self.path)
        except BaseException:
            os.close(out)
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        finally:
            os.close(src)
        os.close(self.fd)
        self.fd = out

    def _marker(self) -> bytes:
        tail = self.limit - self.tail_at
        text = (
            f"\n[gpuyard: {self.dropped} bytes of this task's output were dropped here; its log "
            f"keeps the first {_mib(self.head)} and the last {_mib(tail - self.slack)} to "
            f"{_mib(tail)} of what it printed, at most {_mib(self.limit)} in all]"
        ).encode()
        return text[: self.block - 1].ljust(self.block - 1) + b"\n"


def _copy(src: int, dst: int, src_at: int, dst_at: int, count: int) -> None:
    while count > 0:
        done = os.copy_file_range(src, dst, count, src_at, dst_at)
        if done == 0:
            break
        src_at, dst_at, count = src_at + done, dst_at + done, count - done


class LogPump:
    """The pipe between a container's stdout/stderr (`write_end`, given to `<rt> create`)
    and its `CappedLog`, pumped by the supervisor's wait loop (`fds`, `pump_ready`).

    At most `rate` bytes a second: the supervisor is not in the task's cgroup, and moving a
    flood costs CPU (`yes` under a 1-CPU quota printed 560 MB/s, which took the supervisor
    0.47 CPU); past the rate the pipe fills and the task's own writes wait (`wait_s`).
    """

    def __init__(self, log: CappedLog, rate: int = RATE) -> None:
        self.log = log
        self.rate = rate
        self.window = time.monotonic()  # the current second, and what it moved so far
        self.moved = 0
        self.read_end, self.write_end = os.pipe2(os.O_CLOEXEC)
        with contextlib.suppress(OSError):  # fewer wake-ups for a chatty task
            fcntl.fcntl(self.write_end, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        os.set_blocking(self.read_end, False)
        self.eof = False

    def fds(self) -> list[int]:
        """What to select on for reading (nothing once every writer has gone, or while the
        rate is used up)."""
        return [] if self.eof or self.wait_s() > 0 else [self.read_end]

    def wait_s(self) -> float:
        """Seconds until it may read again (0: now)."""
        now = time.monotonic()
        if now - self.window >= 1.0:
            self.window, self.moved = now, 0
        return 0.0 if self.moved < self.rate else self.window + 1.0 - now

    def close_write_end(self) -> None:
        """Ours, once the container has it: the pipe ends when the container's copies do."""
        if self.write_end >= 0:
            os.close(self.write_end)
            self.write_end = -1

    def pump_ready(self, budget: int = PUMP_BUDGET) -> None:
        """Move what is in the pipe now (up to `budget` bytes, so a flood cannot keep the
        caller from its other work) into the log."""
        moved, budget = 0, min(budget, max(0, self.rate - self.moved))
        try:
            while not self.eof and moved < budget:
                n = self.log.pump(self.read_end, budget - moved)
                self.eof = n == 0
                moved += n
        except BlockingIOError:
            pass
        finally:
            self.moved += moved

    def drain(self, timeout_s: float) -> None:
        """Pump until every writer has gone, for at most `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        self.rate = 1 << 62  # what is left (a pipe's worth: its writers are gone) at once
        while not self.eof:
            self.pump_ready()
            left = deadline - time.monotonic()
            if self.eof or left <= 0:
                return
            select.select(self.fds(), [], [], left)

    def close(self) -> None:
        self.close_write_end()
        os.close(self.read_end)
        self.log.close()
