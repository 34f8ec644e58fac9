"""The node's zygote: a resident process that forks task supervisors, so no task waits for a
Python interpreter to start.

`python -m gpuyard.runtime.zygote` is started by `ContainerRuntime` (in its own session, with
one end of a socket pair as fd 0) and has already imported the supervisor's code. It keeps one
*spare*: a child forked ahead of time that waits on a pipe for a task dir. A request (a task
dir's path) hands the path to the spare, records its pid in `supervisor.pid` and answers; the
next spare is forked once no request came for 50 ms, so neither the fork nor its CPU time is on
a start's path (in a burst of starts, each forks its own). The spare makes its own process
group (in the zygote's session, so that all supervisors share one long-lived scheduler
autogroup: a fresh session per task doubled `crun`'s latency under load), puts its output on
`supervisor.log` and runs `supervisor.run_detached`: the same life an exec'd supervisor has.
SIGCHLD is ignored in the zygote, so the kernel reaps supervisors that end while it lives; when
it ends (the server closed the runtime or died) the spare sees EOF and exits, and running
supervisors are reparented to init, in their own process groups: they outlive the zygote and
the server just as exec'd ones do. Stop signals stay blocked from the fork until the supervisor
has installed its handlers, so a stop sent as soon as the pid is recorded is never lost.

The zygote is single-threaded (forking is safe) and stops when its socket closes (the server
closed the runtime or died). Requests are one datagram each (SOCK_SEQPACKET): the task dir as
UTF-8; the answer `0` (supervisor forked and recorded) or `1` (it could not be recorded).
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import NoReturn

from gpuyard.runtime.supervisor import StopFlag, record_supervisor, run_detached
from gpuyard.runtime.taskdir import TaskDir

MAX_REQUEST = 4096
READY = b"ready"
REPLY_TIMEOUT_S = 30.0
SPARE_AFTER_S = 0.05  # fork the next spare once no request came for this long
ACK = b"1"
ACK_TIMEOUT_S = 5.0  # a live spare acknowledges within microseconds
STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}


class Spare:
    """A supervisor forked ahead of its task: it waits on a pipe for its task dir's path and
    acknowledges it on another, so a spare killed while it waited is never handed a task."""

    def __init__(self, sock: socket.socket) -> None:
        r, self._w = os.pipe2(os.O_CLOEXEC)
        self._ack_r, ack_w = os.pipe2(os.O_CLOEXEC)
        sys.stderr.flush()
        self.pid = os.fork()
        if self.pid == 0:
            os.close(self._w)
            os.close(self._ack_r)
            become_supervisor(sock, r, ack_w)
        os.close(r)
        os.close(ack_w)

    def take(self, td: TaskDir) -> bool:
        """Hand it `td`; False if it is gone (killed while it waited, or not answering)."""
        try:
            os.write(self._w, str(td.path).encode())
        except BrokenPipeError:
            return False
        finally:
            os.close(self._w)
        try:
            if select.select([self._ack_r], [], [], ACK_TIMEOUT_S)[0]:
                return os.read(self._ack_r, 1) == ACK  # b"": it died before taking it
            os.kill(self.pid, signal.SIGKILL)  # stuck: never let it start the task later
            return False
        finally:
            os.close(self._ack_r)


def serve(sock: socket.socket) -> int:
    """Answer spawn requests until the peer closes the socket."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # supervisors that end are reaped by the kernel
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)  # until a child has its handlers
    spare: Spare | None = Spare(sock)
    sock.sendall(READY)
    while True:
        if spare is None and not select.select([sock], [], [], SPARE_AFTER_S)[0]:
            spare = Spare(sock)  # idle: fork the next one now, off any start's path
        request = sock.recv(MAX_REQUEST)
        if not request:
            return 0  # the spare reads EOF and exits
        td = TaskDir(Path(request.decode()).resolve())
        if spare is None or not spare.take(td):  # busy (a burst), or the spare was killed
            spare = Spare(sock)
            if not spare.take(td):
                sock.sendall(b"1")  # even a fresh spare failed: the start fails
                spare = None
                continue
        sock.sendall(b"0" if record(td, spare.pid) else b"1")
        spare = None


def become_supervisor(sock: socket.socket, task_pipe: int, ack_pipe: int) -> NoReturn:
    """In a spare: undo the zygote's settings, wait for a task, acknowledge it, live as its
    supervisor."""
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        sock.close()
        path = read_all(task_pipe)
        if not path:
            os._exit(0)  # the zygote ended before giving it a task
        os.write(ack_pipe, ACK)
        os.close(ack_pipe)
        td = TaskDir(Path(path.decode()))
        stop = StopFlag()
        stop.install()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # crun must not inherit it
        run_detached(td, stop)
    finally:
        os._exit(1)  # run_detached never returns; an exception is a supervisor that failed


def read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, MAX_REQUEST):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def record(td: TaskDir, pid: int) -> bool:
    """Write `supervisor.pid`; if that fails the supervisor is killed (the start fails)."""
    try:
        record_supervisor(td, pid)
    except OSError as e:
        print(f"cannot write {td.pid_file}: {e}", file=sys.stderr, flush=True)
        os.kill(pid, signal.SIGKILL)
        return False
    return True


def main() -> int:
    """fd 0 is the socket: move it aside and put /dev/null on stdin."""
    sock = socket.socket(fileno=os.dup(0))
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return serve(sock)


class ZygoteError(Exception):
    """The zygote could not be started, or could not be asked: the caller may exec instead."""


class ZygoteLost(ZygoteError):
    """The zygote was asked but did not answer: the supervisor may or may not exist."""


class Zygote:
    """The server's handle on its zygote process (thread-safe; one request at a time)."""

    def __init__(self, log_path: Path) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with open(log_path, "ab") as log:
                self._proc = subprocess.Popen(
                    [sys.executable, "-m", "gpuyard.runtime.zygote"],
                    stdin=theirs,
                    stdout=log,
                    stderr=log,
                    cwd="/",
                    start_new_session=True,
                    close_fds=True,
                )
        except OSError as e:
            ours.close()
            raise ZygoteError(f"cannot start the zygote: {e}") from e
        finally:
            theirs.close()
        self._sock = ours
        self._sock.settimeout(REPLY_TIMEOUT_S)
        self._ready = False
        self._lock = threading.Lock()

    def spawn(self, task_dir: Path) -> int:
        """Fork the supervisor of `task_dir`; 0 once its pid is recorded, else 1."""
        with self._lock:
            try:
                if not self._ready:
                    self._ready = self._sock.recv(len(READY)) == READY
                self._sock.sendall(str(task_dir).encode())
            except OSError as e:  # timeout, broken pipe, reset
                raise ZygoteError(f"the zygote cannot be asked: {e}") from e
            if not self._ready:
                raise ZygoteError("the zygote ended before it was ready")
            try:
                reply = self._sock.recv(64)
            except OSError as e:
                raise ZygoteLost(f"the zygote did not answer: {e}") from e
            if not reply:
                raise ZygoteLost("the zygote ended while forking")
            return int(reply)

    @property
    def alive(self) -> bool:
        return self._proc.poll() is None

    def close(self) -> None:
        """Close the socket (the zygote exits) and reap it."""
        self._sock.close()
        try:
            self._proc.wait(timeout=REPLY_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


if __name__ == "__main__":
    sys.exit(main())
