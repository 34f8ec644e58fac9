"""A node's open byte streams into its running tasks: exec sessions and port connections.

`NodeStreams` keeps them by id, so the same calls serve a caller in the same process (the
local engine) and one that reaches the node through a Ray actor (`engine/raystreams.py`):
open, then `read` (waits up to `wait_s` for output), `write`, `close_input`, `resize`,
`close`. What `read` returns is a list of frames `(channel, bytes)`:

| channel | from → to | what |
|---|---|---|
| 0 | caller → stream | the command's stdin, or bytes to the port |
| 1 | stream → caller | the command's stdout (a terminal's output), or bytes from the port |
| 2 | stream → caller | the command's stderr (and the OCI runtime's own errors) |
| 3 | stream → caller | the end, as JSON: `{"exitCode": N}` (exec) or `{"closed": true}` (port) |

After channel 3 the stream is gone. A node holds at most `MAX_STREAMS` at once, and closes
one nobody has read or written for `IDLE_S` (its caller left without closing it).
"""

from __future__ import annotations

import abc
import contextlib
import json
import os
import secrets
import select
import socket
import threading
import time
from pathlib import Path

from gpuyard.runtime.netdial import dial_task
from gpuyard.runtime.taskdir import TaskDir, check_key
from gpuyard.runtime.taskexec import ExecError, ExecProcess, ExecRequest

MAX_STREAMS = 48
IDLE_S = 120.0
CHUNK = 64 << 10
MAX_WAIT_S = 5.0
WRITE_TIMEOUT_S = 30.0

Frame = tuple[int, bytes]


class StreamGone(Exception):
    """No such stream (ended, closed, or idle too long)."""


class _Stream(abc.ABC):
    """Output fds to read, an input fd to write, and what ends it."""

    def __init__(self) -> None:
        self.touched = time.monotonic()
        self.read_lock = threading.Lock()
        self.write_lock = threading.Lock()
        self.closed = False

    @abc.abstractmethod
    def outputs(self) -> dict[int, int]:
        """Output fds still open → their channel."""

    @abc.abstractmethod
    def input_fd(self) -> int | None:
        """Where channel 0 is written (None: input closed)."""

    @abc.abstractmethod
    def drop_output(self, fd: int) -> None:
        """`fd` reached its end."""

    @abc.abstractmethod
    def end(self) -> bytes:
        """The channel-3 frame, once every output is at its end."""

    @abc.abstractmethod
    def close_input(self) -> None:
        """No more input."""

    @abc.abstractmethod
    def resize(self, rows: int, cols: int) -> None:
        """A terminal's new size."""

    @abc.abstractmethod
    def release(self) -> None:
        """Kill what runs and close every fd."""


class _ExecStream(_Stream):
    def __init__(self, proc: ExecProcess) -> None:
        super().__init__()
        self.proc = proc
        self.open = dict(proc.outputs)

    def outputs(self) -> dict[int, int]:
        return self.open

    def input_fd(self) -> int | None:
        return self.proc.input_fd

    def drop_output(self, fd: int) -> None:
        self.open.pop(fd, None)

    def end(self) -> bytes:
        return json.dumps({"exitCode": self.proc.exit_code()}).encode()

    def close_input(self) -> None:
        self.proc.close_input()

    def resize(self, rows: int, cols: int) -> None:
        self.proc.resize(rows, cols)

    def release(self) -> None:
        self.proc.kill()
        self.proc.release()


class _PortStream(_Stream):
    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self.sock = sock
        self.open = {sock.fileno(): 1}

    def outputs(self) -> dict[int, int]:
        return self.open

    def input_fd(self) -> int | None:
        return self.sock.fileno()

    def drop_output(self, fd: int) -> None:
        self.open.pop(fd, None)

    def end(self) -> bytes:
        return b'{"closed": true}'

    def close_input(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)

    def resize(self, rows: int, cols: int) -> None:
        """A port has no terminal: nothing to resize."""

    def release(self) -> None:
        self.sock.close()


class NodeStreams:
    """The open streams of one node's tasks (`tasks_dir`: `<state_root>/tasks`)."""

    def __init__(self, tasks_dir: Path) -> None:
        self.tasks_dir = tasks_dir
        self._lock = threading.Lock()
        self._streams: dict[str, _Stream] = {}

    def open_exec(self, key: str, args: list[str], tty: bool, rows: int, cols: int) -> str:
        self._room()
        proc = ExecProcess(self._task(key), ExecRequest(tuple(args), tty, rows, cols))
        return self._add(_ExecStream(proc))

    def open_port(self, key: str, port: int) -> str:
        self._room()
        return self._add(_PortStream(dial_task(self._task(key), port)))

    def read(self, sid: str, wait_s: float) -> list[Frame]:
        stream = self._get(sid)
        with stream.read_lock:
            if stream.closed:
                raise StreamGone(sid)
            frames = _read_ready(stream, max(0.0, min(wait_s, MAX_WAIT_S)))
            if not stream.outputs():
                frames.append((3, stream.end()))
                self._drop(sid, stream)
        stream.touched = time.monotonic()
        return frames

    def write(self, sid: str, data: bytes) -> None:
        stream = self._get(sid)
        with stream.write_lock:
            fd = stream.input_fd()
            if fd is None:
                return
            _write_all(fd, data)
        stream.touched = time.monotonic()

    def close_input(self, sid: str) -> None:
        self._get(sid).close_input()

    def resize(self, sid: str, rows: int, cols: int) -> None:
        self._get(sid).resize(max(1, min(rows, 9999)), max(1, min(cols, 9999)))

    def close(self, sid: str) -> None:
        with self._lock:
            stream = self._streams.pop(sid, None)
        if stream is not None:
            _release(stream)

    def close_all(self) -> None:
        with self._lock:
            streams, self._streams = list(self._streams.values()), {}
        for stream in streams:
            _release(stream)

    def count(self) -> int:
        with self._lock:
            return len(self._streams)

    def _task(self, key: str) -> TaskDir:
        try:
            return TaskDir(self.tasks_dir / check_key(key))
        except ValueError as e:
            raise ExecError(str(e)) from e

    def _room(self) -> None:
        """Close idle streams; refuse a new one beyond the node's cap."""
        now = time.monotonic()
        with self._lock:
            idle = [s for s, st in self._streams.items() if now - st.touched > IDLE_S]
            stale = [self._streams.pop(s) for s in idle]
            full = len(self._streams) >= MAX_STREAMS
        for stream in stale:
            _release(stream)
        if full:
            raise ExecError(f"this node has {MAX_STREAMS} exec and port sessions open; try later")

    def _add(self, stream: _Stream) -> str:
        sid = secrets.token_hex(8)
        with self._lock:
            self._streams[sid] = stream
        return sid

    def _get(self, sid: str) -> _Stream:
        with self._lock:
            stream = self._streams.get(sid)
        if stream is None:
            raise StreamGone(sid)
        return stream

    def _drop(self, sid: str, stream: _Stream) -> None:
        with self._lock:
            if self._streams.get(sid) is stream:
                del self._streams[sid]
        stream.closed = True
        stream.release()


def _release(stream: _Stream) -> None:
    """Kill and close a stream someone else may be reading: after its read."""
    with stream.read_lock:
        if not stream.closed:
            stream.closed = True
            stream.release()


def _read_ready(stream: _Stream, wait_s: float) -> list[Frame]:
    outputs = stream.outputs()
    if not outputs:
        return []
    ready, _, _ = select.select(list(outputs), [], [], wait_s)
    frames: list[Frame] = []
    for fd in ready:
        try:
            data = os.read(fd, CHUNK)
        except BlockingIOError:
            continue
        except OSError:  # EIO: a terminal whose last holder is gone
            data = b""
        if data:
            frames.append((outputs[fd], data))
        else:
            stream.drop_output(fd)
    return frames


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    deadline = time.monotonic() + WRITE_TIMEOUT_S
    while view:
        _, ready, _ = select.select([], [fd], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            raise ExecError("the task does not read its input")
        try:
            view = view[os.write(fd, view) :]
        except BrokenPipeError:
            return  # it closed its input: what is left is dropped, as a pipe does


_registry: dict[Path, NodeStreams] = {}
_registry_lock = threading.Lock()


def streams_for(tasks_dir: Path) -> NodeStreams:
    """The one `NodeStreams` of a node's tasks dir in this process, made on first use."""
    with _registry_lock:
        found = _registry.get(tasks_dir)
        if found is None:
            found = _registry[tasks_dir] = NodeStreams(tasks_dir)
        return found
