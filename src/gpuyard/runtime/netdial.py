"""A TCP connection to a port inside a task (`gpuyard port-forward`, web services).

A task has a network namespace of its own, which the host's own sockets cannot reach into
(docs/security.md, *Network*). The connection is made from inside that namespace instead: a
short-lived thread joins it (`setns(2)` changes the namespace of the calling thread only),
makes the socket and connects it to `127.0.0.1:PORT`, and exits; a socket stays in the
namespace it was made in, so the caller uses it as any other. The port is the task's own
loopback: a server in the task that listens on `0.0.0.0` or `127.0.0.1` answers, nothing else
of the namespace is reached. A task in the host's network (`hostNetwork`) is refused: its
loopback is the host's.
"""

from __future__ import annotations

import ctypes
import os
import socket
import threading
from typing import Any

from gpuyard.runtime.taskdir import TaskDir
from gpuyard.runtime.taskexec import ExecError, running_task

CLONE_NEWNET = 0x40000000
CONNECT_TIMEOUT_S = 5.0
_libc = ctypes.CDLL(None, use_errno=True)


def task_netns(config: dict[str, Any]) -> str | None:
    """The path of the network namespace the task's container joined (None: the host's)."""
    for ns in config.get("linux", {}).get("namespaces", []):
        if ns.get("type") == "network":
            return ns.get("path") or None
    return None


def dial_task(td: TaskDir, port: int) -> socket.socket:
    """A connected TCP socket to `127.0.0.1:port` inside the running task's namespace."""
    if not 0 < port < 65536:
        raise ExecError(f"port must be 1-65535, got {port}")
    _, _, config = running_task(td)
    path = task_netns(config)
    if path is None:
        raise ExecError(
            f"task {td.key} runs in its node's network (hostNetwork): connect to the node's "
            "address instead"
        )
    return dial_in_netns(path, port)


def dial_in_netns(netns_path: str, port: int) -> socket.socket:
    result: list[socket.socket | BaseException] = []
    thread = threading.Thread(target=_dial, args=(netns_path, port, result), daemon=True)
    thread.start()
    thread.join(CONNECT_TIMEOUT_S + 1)
    if not result:
        raise ExecError(f"port {port} of the task did not answer in {CONNECT_TIMEOUT_S:.0f} s")
    outcome = result[0]
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def _dial(netns_path: str, port: int, result: list[socket.socket | BaseException]) -> None:
    try:
        fd = os.open(netns_path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        result.append(ExecError(f"the task's network is gone ({e.strerror})"))
        return
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            result.append(ExecError(f"cannot enter the task's network: {os.strerror(err)}"))
            return
    finally:
        os.close(fd)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(CONNECT_TIMEOUT_S)
    try:
        sock.connect(("127.0.0.1", port))
    except OSError as e:
        sock.close()
        why = "nothing listens there" if isinstance(e, ConnectionRefusedError) else str(e)
        result.append(ExecError(f"cannot connect to port {port} in the task: {why}"))
        return
    sock.settimeout(None)
    result.append(sock)
