"""A command run inside a running task's container (`gpuyard exec`): `<rt> exec`.

The command gets the task's own process settings, copied from its OCI config: its user and
groups, capabilities, environment, `noNewPrivileges`, rlimits and working dir; the
container's namespaces, cgroup and seccomp filter apply to it as to the task's init (crun and
runc enter them for every exec). Only the arguments and the terminal differ.

With a terminal, `<rt> exec --console-socket` hands the pseudo-terminal's master back over a
Unix socket (SCM_RIGHTS), so the caller reads and writes it and resizes it (TIOCSWINSZ) with
no relay process between; without one, the command's stdin, stdout and stderr are pipes.
`--pid-file` names the command's own host pid, so that closing a session ends the command
even when it ignores the hang-up (`kill`). `<rt> exec` itself waits for the command and exits
with its status, which is the session's exit code.
"""

from __future__ import annotations

import array
import contextlib
import fcntl
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import termios
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuyard.runtime.ociruntime import OciRuntime
from gpuyard.runtime.taskdir import TaskDir, process_starttime, read_json, write_json

CONSOLE_TIMEOUT_S = 10.0
WAIT_S = 5.0
MAX_ARGS_BYTES = 64 << 10
SCRATCH = Path("/run/gpuyard/exec")  # short paths: a Unix socket path is ≤ 107 bytes


class ExecError(Exception):
    """The command cannot be run in the task; the message says why, in a user's words."""


@dataclass(frozen=True, slots=True)
class ExecRequest:
    args: tuple[str, ...]
    tty: bool = False
    rows: int = 24
    cols: int = 80

    def check(self) -> None:
        if not self.args or not self.args[0]:
            raise ExecError("exec needs a command")
        if any("\0" in a for a in self.args) or sum(len(a) for a in self.args) > MAX_ARGS_BYTES:
            raise ExecError(f"the command must be ≤ {MAX_ARGS_BYTES} bytes without NUL bytes")
        if not (0 < self.rows < 10_000 and 0 < self.cols < 10_000):
            raise ExecError("the terminal's rows and columns must be 1-9999")


def running_task(td: TaskDir) -> tuple[OciRuntime, str, dict[str, Any]]:
    """The runtime, container id and OCI config of a task whose container runs now."""
    spec, config = read_json(td.task), read_json(td.config)
    if not isinstance(spec, dict) or not isinstance(config, dict):
        raise ExecError(f"task {td.key} has no container on this node")
    if not td.started.exists():
        raise ExecError(f"task {td.key} has not started yet")
    if td.exit_file.exists():
        raise ExecError(f"task {td.key} has ended")
    return OciRuntime.from_json(spec["runtime"]), str(spec["containerId"]), config


def exec_process(config: dict[str, Any], req: ExecRequest) -> dict[str, Any]:
    """The task's `process` with the command's arguments and terminal."""
    process = dict(config["process"])
    process["args"] = list(req.args)
    process["terminal"] = req.tty
    process.pop("consoleSize", None)
    if req.tty:
        process["consoleSize"] = {"height": req.rows, "width": req.cols}
        process["env"] = [e for e in process.get("env", []) if not e.startswith("TERM=")]
        process["env"].append("TERM=xterm-256color")
    return process


class ExecProcess:
    """One `<rt> exec` of a command: the fds to read (`outputs`: fd → 1 stdout, 2 stderr),
    the fd to write (`input_fd`), its resize and its exit code."""

    def __init__(self, td: TaskDir, req: ExecRequest) -> None:
        req.check()
        rt, container, config = running_task(td)
        SCRATCH.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._dir = Path(tempfile.mkdtemp(dir=SCRATCH))
        self._pid_file = self._dir / "pid"
        self.tty = req.tty
        self.outputs: dict[int, int] = {}
        self.input_fd: int | None = None
        self._master: int | None = None
        try:
            write_json(self._dir / "process.json", exec_process(config, req))
            args = ["exec", "--process", str(self._dir / "process.json")]
            args += ["--pid-file", str(self._pid_file)]
            if req.tty:
                self._start_tty(rt, args, container)
            else:
                self._start_pipes(rt, args, container)
        except BaseException:
            self.kill()
            self.release()
            raise

    def _start_pipes(self, rt: OciRuntime, args: list[str], container: str) -> None:
        self.proc = _popen(rt.command(*args, container), stdin=subprocess.PIPE)
        assert self.proc.stdin and self.proc.stdout and self.proc.stderr
        self.input_fd = self.proc.stdin.fileno()
        self.outputs = {self.proc.stdout.fileno(): 1, self.proc.stderr.fileno(): 2}

    def _start_tty(self, rt: OciRuntime, args: list[str], container: str) -> None:
        path = str(self._dir / "console")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
            listener.bind(path)
            listener.listen(1)
            listener.settimeout(CONSOLE_TIMEOUT_S)
            args += ["--console-socket", path]
            self.proc = _popen(rt.command(*args, container), stdin=subprocess.DEVNULL)
            try:
                conn, _ = listener.accept()
            except OSError as e:  # it failed before making the terminal: its own words
                raise ExecError(_said(self.proc) or f"no terminal from {rt.name}: {e}") from e
        with conn:
            self._master = _receive_fd(conn)
        assert self.proc.stdout and self.proc.stderr
        self.input_fd = self._master
        self.outputs = {self._master: 1, self.proc.stdout.fileno(): 2, self.proc.stderr.fileno(): 2}

    def resize(self, rows: int, cols: int) -> None:
        if self._master is not None:
            fcntl.ioctl(self._master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def close_input(self) -> None:
        """End of the command's input: its stdin closed (a terminal gets ^D)."""
        if self._master is not None:
            with contextlib.suppress(OSError):
                os.write(self._master, b"\x04")
        elif self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
            self.input_fd = None

    def exit_code(self) -> int:
        """The command's exit status (128 + N for a signal N), once `<rt> exec` returns."""
        try:
            code = self.proc.wait(WAIT_S)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.proc.wait(WAIT_S)
        return 128 - code if code < 0 else code

    def kill(self) -> None:
        """End the command (by its host pid, checked against reuse) and `<rt> exec`."""
        with contextlib.suppress(OSError, ValueError):
            pid = int(self._pid_file.read_text().strip())
            start = process_starttime(pid)
            if start is not None:
                os.kill(pid, signal.SIGKILL)
        proc = getattr(self, "proc", None)
        if proc is not None and proc.poll() is None:
            proc.kill()

    def release(self) -> None:
        """Close every fd and remove the scratch dir (after `kill` or the command's end)."""
        if self._master is not None:
            with contextlib.suppress(OSError):
                os.close(self._master)
            self._master = None
        proc = getattr(self, "proc", None)
        if proc is not None:
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(WAIT_S)
        shutil.rmtree(self._dir, ignore_errors=True)


def _popen(cmd: list[str], stdin: int) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(
            cmd, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, close_fds=True
        )
    except OSError as e:
        raise ExecError(f"cannot run {cmd[0]}: {e}") from e


def _said(proc: subprocess.Popen[bytes]) -> str:
    """What a failed `<rt> exec` wrote on stderr (if it ended)."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(1.0)
        if proc.stderr is not None:
            return proc.stderr.read(4096).decode(errors="replace").strip()
    return ""


def _receive_fd(conn: socket.socket) -> int:
    fds = array.array("i")
    _, ancillary, _, _ = conn.recvmsg(4096, socket.CMSG_SPACE(fds.itemsize))
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
    if not fds:
        raise ExecError("the OCI runtime sent no terminal")
    for extra in fds[1:]:
        os.close(extra)
    return fds[0]
