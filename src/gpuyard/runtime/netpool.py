"""Spare task network namespaces, made ahead of time so that a task's start only takes one.

Making one (`ip netns add`, then the CNI `bridge` plugin, which execs `host-local`) takes
~25 ms of process starts; a start that had to do it would be ~2x a bare `crun run`. Like the
zygote's spare supervisor, the node keeps `size` of them ready: each is a record
`<dir>/<netns>.json` (`{"netns", "address", "cni"}`), and `take` moves one to where the caller
wants it (a rename: a record is in the pool or claimed, never both). A thread refills the pool
once no take came for `IDLE_S`, and runs `tick` (the caller's periodic sweep) every `TICK_S`.
Nothing is made before the first `wake`: a node that never runs an isolated task makes none;
a spare that cannot be recorded is removed at once (`discard`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuyard.runtime.taskdir import write_json

log = logging.getLogger("gpuyard.runtime")

IDLE_S = 0.05  # refill once no take came for this long (a burst takes first)
TICK_S = 30.0
RETRY_S = 5.0  # after a failed make

Record = dict[str, Any]


class NetnsPool:
    def __init__(
        self,
        directory: Path,
        make: Callable[[], Record],
        discard: Callable[[Record], None],
        size: int,
        tick: Callable[[], None] = lambda: None,
    ) -> None:
        self.dir = directory
        self._make, self._discard, self._size, self._tick = make, discard, size, tick
        self._wake = threading.Event()
        self._halt = threading.Event()
        self._last_take = 0.0
        self._thread: threading.Thread | None = None
        self._started = threading.Lock()

    def records(self) -> list[Path]:
        with contextlib.suppress(FileNotFoundError):
            return sorted(p for p in self.dir.iterdir() if p.suffix == ".json")
        return []

    def take(self, dest: Path) -> bool:
        """Move a spare's record to `dest`; False if the pool is empty."""
        self._last_take = time.monotonic()
        for record in self.records():
            try:
                os.rename(record, dest)
            except FileNotFoundError:
                continue
            return True
        return False

    def wake(self) -> None:
        """Refill soon (the thread starts on the first call)."""
        with self._started:
            if self._thread is None and self._size > 0:
                self._thread = threading.Thread(target=self._run, name="gpuyard-netns", daemon=True)
                self._thread.start()
        self._wake.set()

    def close(self) -> None:
        self._halt.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=60)

    def _run(self) -> None:
        next_tick = time.monotonic() + TICK_S
        while not self._halt.is_set():
            self._wake.wait(max(0.0, next_tick - time.monotonic()))
            self._wake.clear()
            if time.monotonic() >= next_tick:
                next_tick = time.monotonic() + TICK_S
                self._safely(self._tick)
            self._refill()

    def _refill(self) -> None:
        while not self._halt.is_set() and len(self.records()) < self._size:
            idle = time.monotonic() - self._last_take
            if idle < IDLE_S:
                self._halt.wait(IDLE_S - idle)
                continue
            if not self._safely(self._add_one):
                self._halt.wait(RETRY_S)
                return

    def _add_one(self) -> None:
        """One more spare, recorded; none at all where the pool's dir is gone (a node whose
        state root was removed under it makes nothing it could not record)."""
        if not self.dir.is_dir():
            return
        record = self._make()
        try:
            write_json(self.dir / f"{record['netns']}.json", record)
        except OSError:
            self._discard(record)
            raise

    def _safely(self, step: Callable[[], None]) -> bool:
        try:
            step()
        except Exception:  # the node keeps running; a start makes its own meanwhile
            log.exception("task network pool: %s failed", getattr(step, "__name__", step))
            return False
        return True
