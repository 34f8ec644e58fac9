"""Sessions into a running task, for `gpuyard exec`, `port-forward` and `run` (and whatever
else needs a byte stream to a task: an ssh `ProxyCommand` is `relay` on stdin and stdout).

- `open_exec` / `open_port` open the API's WebSocket and send the request (`open_exec`'s
  `attach`: an interactive job's own session, for `gpuyard run`);
- `relay(ws, in_fd, out_fd)` copies bytes both ways until either side ends;
- `interact(ws, tty)` is an exec on this terminal: stdin to the command, its stdout and stderr
  here, the terminal raw and its size followed (SIGWINCH), the command's exit code returned;
- `forward(...)` listens on a local port and gives each connection a tunnel of its own.

Standard library and wsproto only (`wsclient.py`): the fast path's rules (docs/cli.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import select
import shutil
import signal
import socket
import sys
import termios
import threading
import tty as ttymode
from collections.abc import Callable, Iterator
from urllib.parse import quote

from gpuyard.cli.basics import ApiError
from gpuyard.cli.wsclient import END, WsSession, ended, refusal

CHUNK = 64 << 10
RESIZE = 4
OPENED = 5
WAITING = 6  # an attached session's progress before it opens, JSON (docs/interactive.md)

Progress = Callable[[dict[str, object]], None]


def open_exec(
    url: str,
    token: str | None,
    job: str,
    task: str | None,
    command: list[str],
    tty: bool,
    attach: bool = False,
) -> WsSession:
    """An exec session; `attach`: the session of an interactive job (`gpuyard run`: the
    server waits for its task, and ends the job with the session)."""
    ws = WsSession(url, token, f"/api/v1/jobs/{quote(job, safe='')}/exec")
    rows, cols = _size() if tty else (24, 80)
    request = {"command": command, "task": task, "tty": tty, "rows": rows, "cols": cols}
    ws.send_json(request | ({"attach": True} if attach else {}))
    return ws


def open_port(
    url: str, token: str | None, job: str, task: str | None, port: int, run: str | None = None
) -> WsSession:
    """A tunnel to `port` on the task's loopback; `run` names one client run (its
    connections are one event on the job)."""
    ws = WsSession(url, token, f"/api/v1/jobs/{quote(job, safe='')}/portforward")
    ws.send_json({"port": port, "task": task, "session": run})
    return ws


def first_frames(ws: WsSession, progress: Progress | None = None) -> None:
    """Wait until the server says the session is open (channel 5); raise its refusal
    (ApiError) if it is one instead. Frames after it stay for the next `receive`. What an
    attached session waits for (channel 6, JSON) goes to `progress`."""
    while True:
        frames = ws.receive()
        for at, (channel, data) in enumerate(frames):
            if channel == OPENED:
                ws.pending = frames[at + 1 :]
                return
            if channel == END:
                raise refusal(ended(data))
            if channel == WAITING and progress is not None:
                progress(ended(data))


def relay(ws: WsSession, in_fd: int, out_fd: int) -> dict[str, object]:
    """Bytes from `in_fd` to the task and from the task to `out_fd` until the task's side
    ends (its channel-3 JSON is returned); the end of `in_fd` closes the task's input."""
    reading = True
    while True:
        if ws.pending:
            ready = [ws]
        else:
            ready, _, _ = select.select([ws, in_fd] if reading else [ws], [], [])
        if in_fd in ready:
            data = _read(in_fd)
            ws.send(0, data)  # empty: the end of the input
            reading = bool(data)
        if ws in ready:
            for channel, data in ws.receive():
                if channel == END:
                    return ended(data)
                _write(out_fd, data)


def interact(ws: WsSession, tty: bool, stdin: bool, progress: Progress | None = None) -> int:
    """Run the exec on this terminal (stdin only with `stdin`); the command's exit code.
    `progress` is told what an attached session waits for, before it opens."""
    first_frames(ws, progress)
    if not stdin:  # the command's input ends at once, as docker exec without -i: no read waits
        ws.send(0, b"")
    in_fd, out, err = sys.stdin.fileno(), sys.stdout.fileno(), sys.stderr.fileno()
    with _raw_terminal(in_fd if tty and os.isatty(in_fd) else None) as resized:
        try:
            end = _exec_loop(ws, in_fd if stdin else None, out, err, resized)
        finally:
            ws.close()
    if "error" in end:
        raise refusal(end)
    code = end.get("exitCode")
    return code if isinstance(code, int) else 1


@contextlib.contextmanager
def _raw_terminal(fd: int | None) -> Iterator[int | None]:
    """This terminal raw while the session runs (`fd` None: left as it is); yields the read
    end of a pipe that becomes readable when the terminal is resized (SIGWINCH).

    Raw mode is set with TCSADRAIN, as ssh does, never tty's default TCSAFLUSH: that would
    throw away what was typed before the session opened (a pasted or piped line is lost, and
    the shell waits forever for it)."""
    if fd is None:
        yield None
        return
    saved = termios.tcgetattr(fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    previous = signal.signal(signal.SIGWINCH, lambda *_: _poke(wake_w))
    ttymode.setraw(fd, termios.TCSADRAIN)
    try:
        yield wake_r
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
        signal.signal(signal.SIGWINCH, previous)
        os.close(wake_r)
        os.close(wake_w)


def _poke(fd: int) -> None:
    """In a signal handler: only mark the pipe (sending here could split a frame in two)."""
    with contextlib.suppress(OSError):
        os.write(fd, b"w")


def _exec_loop(
    ws: WsSession, in_fd: int | None, out: int, err: int, resized: int | None
) -> dict[str, object]:
    reading = in_fd is not None
    while True:
        if ws.pending:
            ready: list[object] = [ws]
        else:
            wanted = [x for x in (ws, in_fd if reading else None, resized) if x is not None]
            ready, _, _ = select.select(wanted, [], [])
        if resized is not None and resized in ready:
            os.read(resized, 512)
            _send_size(ws)
        if reading and in_fd in ready:
            data = _read(in_fd)
            ws.send(0, data)
            reading = bool(data)
        if ws in ready:
            for channel, data in ws.receive():
                if channel == END:
                    return ended(data)
                _write(err if channel == 2 else out, data)


def forward(
    url: str,
    token: str | None,
    job: str,
    task: str | None,
    local: tuple[str, int],
    remote: int,
    ready: Callable[[tuple[str, int]], None] | None = None,
) -> None:
    """Listen on `local`; each connection gets its own tunnel to `remote` (until interrupted).
    `ready` is told the address listened on (port 0 picks one)."""
    run = secrets.token_hex(8)
    with socket.create_server(local) as server:
        if ready is not None:
            ready(server.getsockname()[:2])
        while True:
            conn, _ = server.accept()
            threading.Thread(
                target=_serve_connection,
                args=(conn, url, token, job, task, remote, run),
                daemon=True,
            ).start()


def _serve_connection(
    conn: socket.socket, url: str, token: str | None, job: str, task: str | None, port: int,
    run: str,
) -> None:
    with conn:
        try:
            ws = open_port(url, token, job, task, port, run)
        except Exception as exc:  # the server cannot be reached: this connection only
            sys.stderr.write(f"gpuyard: {exc}\n")
            return
        try:
            first_frames(ws)
            end = relay(ws, conn.fileno(), conn.fileno())
            if "error" in end:  # the tunnel broke after it opened (the task went away, ...)
                sys.stderr.write(f"gpuyard: port {port}: {refusal(end).detail}\n")
        except ApiError as exc:
            sys.stderr.write(f"gpuyard: port {port}: {exc.detail}\n")
        except OSError:
            pass  # the local side went away
        except Exception as exc:  # the server's side broke mid-tunnel: this connection only
            sys.stderr.write(f"gpuyard: port {port}: the tunnel broke: {exc}\n")
        finally:
            with contextlib.suppress(Exception):
                ws.close()


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, CHUNK)
    except OSError:
        return b""


def _write(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _size() -> tuple[int, int]:
    size = shutil.get_terminal_size((80, 24))
    return size.lines, size.columns


def _send_size(ws: WsSession) -> None:
    rows, cols = _size()
    with contextlib.suppress(Exception):
        ws.send(RESIZE, json.dumps({"rows": rows, "cols": cols}).encode())
