"""Change hints from task supervisors to the node: "task K started" or "task K exited".

A supervisor sends one datagram to its node's notify socket after it writes `started` or
`exit.json`; the node's listener wakes whoever watches (the controller), so a start or an
exit is seen at once rather than at the next poll. A hint is only a hint: the files stay the
truth, and a lost datagram (no server running, a full buffer) costs nothing but latency.

The channel is one a task can neither reach nor flood:

- a pathname socket, `<state_root>/run/notify.sock`, in a dir only root (the server's uid)
  may enter (0700); the state root itself is hidden from tasks (`rootfs.HostRootfs`), and an
  image root never shows the host. A state root too long for a socket path (108 bytes) uses
  `/run/gpuyard/notify/<hash of the state root>.sock` (that dir 0700 too; tasks get their own
  `/run`). Unlike the abstract namespace used before, no process can bind the name while the
  server is down, and network namespaces do not matter. A stale socket file is swept on bind.
- every datagram carries its sender's credentials (`SO_PASSCRED`, `SCM_CREDENTIALS`); only
  uid 0 and the server's own uid are heard, the rest are counted as rejected and dropped.
- floods are coalesced: the listener drains what is queued in one batch (`BATCH` at most),
  calls `on_hint` at most once per batch, and pauses `HINT_GAP_S` after each; what arrives
  meanwhile waits in the socket's buffer (the kernel drops the excess at the sender, which
  never blocks). So a flood costs the listener at most 50 batches a second, and the
  controller at most 50 wake-ups (none from an untrusted sender); a lone hint is delivered
  at once.

`STATS` counts, for this process, datagrams accepted and rejected and the hints delivered
(`/metrics`: `gpuyard_notify_*`).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import socket
import stat
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

MAX_DATAGRAM = 512
MAX_SOCKET_PATH = 107  # sun_path is 108 bytes, NUL included
FALLBACK_DIR = Path("/run/gpuyard/notify")
BATCH = 1024  # datagrams read before a hint is delivered, at most
HINT_GAP_S = 0.02  # hints delivered at most this often: a burst becomes one wake-up
UCRED = struct.Struct("iII")  # struct ucred: pid, uid, gid

Hint = tuple[str, str]  # (event, task key)

log = logging.getLogger("gpuyard.runtime")


@dataclass
class NotifyStats:
    """What this process' listeners received: totals since it started."""

    accepted: int = 0
    rejected: int = 0  # from a sender that is neither root nor the server's uid
    hints: int = 0  # calls of `on_hint` (each batch with an accepted datagram)


STATS = NotifyStats()


def socket_path(state_root: Path) -> Path:
    """Where the notify socket of `state_root` lives (see the module's docstring)."""
    root = state_root.resolve()
    path = root / "run" / "notify.sock"
    if len(os.fsencode(path)) <= MAX_SOCKET_PATH:
        return path
    digest = hashlib.sha256(os.fsencode(root)).hexdigest()[:24]
    return FALLBACK_DIR / f"{digest}.sock"


def notify(state_root: Path, key: str, event: str) -> None:
    """Best effort, never blocks, never raises."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.setblocking(False)
        s.sendto(f"{event} {key}".encode()[:MAX_DATAGRAM], os.fsencode(socket_path(state_root)))


def private_dir(path: Path) -> None:
    """`path` as a real dir (no symlink) of this uid with mode 0700, made if missing."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise OSError(errno.EPERM, f"{path} is not a dir of uid {os.geteuid()}")
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(path, 0o700)


def bind_socket(path: Path) -> socket.socket:
    """A datagram socket bound at `path` with credentials passing on; a stale socket file
    there is removed first, a live one (another listener answers) is EADDRINUSE."""
    private_dir(path.parent)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        _sweep_stale(path)
        sock.bind(os.fsencode(path))
        os.chmod(path, 0o600)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    except OSError:
        sock.close()
        raise
    return sock


def _sweep_stale(path: Path) -> None:
    if not path.exists() and not path.is_symlink():
        return
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(os.fsencode(path))
        except ConnectionRefusedError:
            path.unlink()  # nobody reads it: left by a server that died
            return
    raise OSError(errno.EADDRINUSE, f"another listener holds {path}")


def trusted_uids() -> frozenset[int]:
    return frozenset({0, os.geteuid()})


def sender_uid(ancillary: list[tuple[int, int, bytes]]) -> int | None:
    """The uid in a datagram's SCM_CREDENTIALS, None if it came without them."""
    for level, kind, data in ancillary:
        if (level, kind) == (socket.SOL_SOCKET, socket.SCM_CREDENTIALS) and len(data) >= UCRED.size:
            return int(UCRED.unpack_from(data)[1])
    return None


class NotifyListener:
    """Receives hints for one state root in a daemon thread and calls `on_hint(event, key)`
    (with the last trusted hint of each batch: earlier ones are coalesced into it)."""

    def __init__(self, state_root: Path, on_hint: Callable[[str, str], None]) -> None:
        self._on_hint = on_hint
        self._trusted = trusted_uids()
        self.path = socket_path(state_root)
        self._sock = bind_socket(self.path)
        self._cmsg = socket.CMSG_SPACE(UCRED.size)
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="gpuyard-notify", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            hint = self._batch()
            if self._closed:
                return
            if hint is not None:
                self._deliver(*hint)
            time.sleep(HINT_GAP_S)  # what comes meanwhile waits for the next batch

    def _batch(self) -> Hint | None:
        """Wait for a datagram, then read what is queued (BATCH at most); the last trusted
        hint of them, or None."""
        got, hint = self._receive(0)
        return self._drain(hint) if got else None

    def _drain(self, hint: Hint | None) -> Hint | None:
        for _ in range(BATCH):
            got, latest = self._receive(socket.MSG_DONTWAIT)
            if not got:
                break
            hint = latest or hint
        return hint

    def _receive(self, flags: int) -> tuple[bool, Hint | None]:
        """(whether a datagram came, its hint if its sender is trusted)."""
        try:
            data, ancillary, _, _ = self._sock.recvmsg(MAX_DATAGRAM, self._cmsg, flags)
        except BlockingIOError:
            return False, None
        except OSError:
            self._closed = True
            return False, None
        if self._closed:
            return False, None
        if sender_uid(ancillary) not in self._trusted:
            STATS.rejected += 1
            return True, None
        STATS.accepted += 1
        event, _, key = data.decode(errors="replace").partition(" ")
        return True, (event, key)

    def _deliver(self, event: str, key: str) -> None:
        STATS.hints += 1
        try:
            self._on_hint(event, key)
        except Exception:  # a watcher's bug must not end the listener
            log.exception("notify hint handler failed")

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        with contextlib.suppress(OSError):
            self.path.unlink()
