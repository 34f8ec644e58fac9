"""Change hints from task supervisors to the node: "task K started" or "task K exited".

A supervisor sends one datagram to its node's notify socket after it writes `started` or
`exit.json`; the node's listener wakes whoever watches (the controller), so a start or an
exit is seen at once rather than at the next poll. A hint is only a hint: the files stay the
truth, and a lost datagram (no server running, a full buffer) costs nothing but latency.

The socket lives in Linux's abstract namespace under a name derived from the state root, so
there is no file to clean up and no limit on the state root's path length.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import socket
import threading
from collections.abc import Callable
from pathlib import Path

MAX_DATAGRAM = 512

log = logging.getLogger("gpuyard.runtime")


def socket_address(state_root: Path) -> str:
    digest = hashlib.sha256(str(state_root.resolve()).encode()).hexdigest()[:24]
    return f"\0gpuyard-notify-{digest}"


def notify(state_root: Path, key: str, event: str) -> None:
    """Best effort, never blocks, never raises."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.setblocking(False)
        s.sendto(f"{event} {key}".encode()[:MAX_DATAGRAM], socket_address(state_root))


class NotifyListener:
    """Receives hints for one state root in a daemon thread and calls `on_hint(event, key)`."""

    def __init__(self, state_root: Path, on_hint: Callable[[str, str], None]) -> None:
        self._on_hint = on_hint
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            self._sock.bind(socket_address(state_root))
        except OSError:
            self._sock.close()
            raise
        self._thread = threading.Thread(target=self._run, name="gpuyard-notify", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                data = self._sock.recv(MAX_DATAGRAM)
            except OSError:
                return  # closed
            event, _, key = data.decode(errors="replace").partition(" ")
            try:
                self._on_hint(event, key)
            except Exception:  # a watcher's bug must not end the listener
                log.exception("notify hint handler failed")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
