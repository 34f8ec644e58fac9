"""The server's listening port on this host: bind it, or say who holds it.

Tasks share the host's network and outlive the server, so a task can take the API port while
the server is down and then receive the clients' bearer tokens. The server therefore binds
and listens before it adopts a single task (`listen_socket`), with `SO_REUSEADDR` (a port in
TIME_WAIT is fine to take) and never `SO_REUSEPORT` (which would share it). If the port is
held, `PortHeld` says by whom: the TCP sockets listening on that port
(`/proc/net/tcp{,6}`, by inode) are matched to processes through their `/proc/PID/fd` links,
and a process in a cgroup under `/gpuyard/` is named as the gpuyard task it is.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
from dataclasses import dataclass
from pathlib import Path

BACKLOG = 2048  # uvicorn's default
TCP_LISTEN = "0A"
TASK_CGROUP = "/gpuyard/"


class PortHeld(Exception):
    """The port is taken; the message names who holds it, as far as this host shows."""


@dataclass(frozen=True, slots=True)
class Holder:
    pid: int
    name: str  # /proc/PID/comm
    task: str | None  # the gpuyard task key of its cgroup, if it is a task

    def describe(self) -> str:
        what = f"pid {self.pid} ({self.name})"
        if self.task is None:
            return f"{what}, not a gpuyard task"
        return f"{what}, the gpuyard task {self.task} (cgroup {TASK_CGROUP}{self.task})"


def listen_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to `host:port` and listening; PortHeld if the port is taken."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)  # as asyncio does
        sock.bind(address)
        sock.listen(BACKLOG)
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise PortHeld(held_message(host, port)) from e
        raise
    return sock


def held_message(host: str, port: int) -> str:
    holders = port_holders(port)
    if not holders:
        who = "a process this server cannot see (another user's, or one that just ended)"
    else:
        who = "; ".join(h.describe() for h in holders)
    advice = (
        " A task must never hold the API port (it would receive the clients' tokens): stop "
        "that task before starting the server."
        if any(h.task for h in holders)
        else ""
    )
    return f"cannot listen on {host}:{port}: the port is already in use by {who}.{advice}"


def port_holders(port: int, proc: Path = Path("/proc")) -> list[Holder]:
    """The processes with a TCP socket listening on `port` (any address), by pid."""
    inodes = listening_inodes(port, proc)
    if not inodes:
        return []
    holders = []
    for pid in _pids(proc):
        if _holds_any(proc / str(pid), inodes):
            holders.append(Holder(pid, _comm(proc / str(pid)), task_of(proc / str(pid))))
    return holders


def listening_inodes(port: int, proc: Path = Path("/proc")) -> set[str]:
    """Socket inodes of the TCP sockets (v4 and v6) listening on `port`."""
    inodes = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for line in (proc / "net" / table).read_text().splitlines()[1:]:
                fields = line.split()
                if len(fields) < 10 or fields[3] != TCP_LISTEN:
                    continue
                if int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(fields[9])
    return inodes


def task_of(pid_dir: Path) -> str | None:
    """The gpuyard task key of the process' cgroup (`/gpuyard/<key>`), None if not a task."""
    try:
        lines = (pid_dir / "cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        path = line.split(":", 2)[-1]
        if path.startswith(TASK_CGROUP):
            return path[len(TASK_CGROUP) :].split("/")[0] or None
    return None


def _pids(proc: Path) -> list[int]:
    return sorted(int(p.name) for p in proc.iterdir() if p.name.isdigit())


def _holds_any(pid_dir: Path, inodes: set[str]) -> bool:
    wanted = {f"socket:[{inode}]" for inode in inodes}
    try:
        fds = os.listdir(pid_dir / "fd")
    except OSError:
        return False
    for fd in fds:
        with contextlib.suppress(OSError):
            if os.readlink(pid_dir / "fd" / fd) in wanted:
                return True
    return False


def _comm(pid_dir: Path) -> str:
    try:
        return (pid_dir / "comm").read_text().strip()
    except OSError:
        return "?"
