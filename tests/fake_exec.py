"""Exec streams of a fake node, for the API's tests of sessions (`TaskStreams`): an exec
opens at once and runs until the test ends it with an exit code (`finish`), or the server
closes it; what the session wrote and how it was opened are kept for the test to read.

Install it on the fake engine: `world.engine.streams = lambda node: streams`.
"""

from __future__ import annotations

import json
import threading

from gpuyard.runtime.streams import StreamGone
from gpuyard.runtime.taskexec import ExecError

POLL_S = 0.02


class CannedExec:
    def __init__(self) -> None:
        self.opened: list[tuple[str, list[str], bool]] = []  # (task key, args, tty)
        self.written: dict[str, bytes] = {}
        self.closed: set[str] = set()
        self._ends: dict[str, int] = {}
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)

    # -- test controls --
    def finish(self, code: int, sid: str | None = None) -> None:
        """End a session (the last opened) as if its command exited with `code`."""
        with self._changed:
            self._ends[sid or f"s{len(self.opened) - 1}"] = code
            self._changed.notify_all()

    def wait_opened(self, count: int = 1, timeout: float = 10) -> None:
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.opened) >= count, timeout):
                raise AssertionError(f"{count} session(s) not opened in {timeout} s")

    def wait_closed(self, sid: str, timeout: float = 10) -> None:
        with self._changed:
            if not self._changed.wait_for(lambda: sid in self.closed, timeout):
                raise AssertionError(f"session {sid} not closed in {timeout} s")

    # -- TaskStreams --
    def open_exec(self, key: str, args: list[str], tty: bool, rows: int, cols: int) -> str:
        with self._changed:
            self.opened.append((key, list(args), tty))
            self._changed.notify_all()
            return f"s{len(self.opened) - 1}"

    def open_port(self, key: str, port: int) -> str:
        raise ExecError(f"cannot connect to port {port} in the task: nothing listens there")

    def read(self, sid: str, wait_s: float) -> list[tuple[int, bytes]]:
        with self._changed:
            self._changed.wait_for(lambda: sid in self._ends or sid in self.closed,
                                   min(wait_s, POLL_S))
            if sid in self.closed:
                raise StreamGone(sid)
            if sid not in self._ends:
                return []
            self.closed.add(sid)
            end = json.dumps({"exitCode": self._ends[sid]}).encode()
            return [(1, b"output\n"), (3, end)]

    def write(self, sid: str, data: bytes) -> None:
        with self._lock:
            self.written[sid] = self.written.get(sid, b"") + data

    def close_input(self, sid: str) -> None:
        return None

    def resize(self, sid: str, rows: int, cols: int) -> None:
        return None

    def close(self, sid: str) -> None:
        with self._changed:
            self.closed.add(sid)
            self._changed.notify_all()
