"""The last hour of every GPU, for the portal's cluster page: per minute, the mean utilisation
and memory in use of each GPU (by UUID), from the readings `GpuReadings` collects from every
node every few seconds. In memory, bounded (60 minutes a GPU; GPUs not read for an hour are
forgotten): after a restart the charts start again.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass

MINUTE_S = 60.0
MINUTES = 60


@dataclass(frozen=True, slots=True)
class GpuPoint:
    """One minute of one GPU: when it began (the readings' clock) and its means."""

    at: float
    util_pct: float
    memory_pct: float | None  # memory in use, % of the GPU's; None where NVML gave none


class GpuHistory:
    def __init__(self, minutes: int = MINUTES) -> None:
        self.window_s = minutes * MINUTE_S
        self._lock = threading.Lock()
        self._done: dict[str, deque[GpuPoint]] = {}
        self._open: dict[str, tuple[float, list[float], list[float]]] = {}  # minute, utils, mems

    def add(self, uuid: str, at: float, util_pct: float, memory_pct: float | None) -> None:
        """A reading of the GPU at `at` (seconds, the readings' clock)."""
        minute = at // MINUTE_S * MINUTE_S
        with self._lock:
            began, utils, mems = self._open.get(uuid, (minute, [], []))
            if began != minute:
                self._close(uuid, began, utils, mems)
                utils, mems = [], []
            utils.append(util_pct)
            if memory_pct is not None:
                mems.append(memory_pct)
            self._open[uuid] = (minute, utils, mems)

    def points(self, uuid: str, now: float) -> list[GpuPoint]:
        """The GPU's minutes within the last hour before `now`, oldest first (the current,
        unfinished minute included)."""
        with self._lock:
            out = [p for p in self._done.get(uuid, ()) if p.at > now - self.window_s]
            if uuid in self._open:
                out.append(_point(*self._open[uuid]))
        return out

    def forget_before(self, now: float) -> None:
        """Drop the GPUs not read within the window (nodes that left, GPUs replaced)."""
        with self._lock:
            for uuid in [u for u, (m, _, _) in self._open.items() if m <= now - self.window_s]:
                del self._open[uuid]
                self._done.pop(uuid, None)

    def _close(self, uuid: str, minute: float, utils: list[float], mems: list[float]) -> None:
        done = self._done.setdefault(uuid, deque(maxlen=int(self.window_s // MINUTE_S)))
        done.append(_point(minute, utils, mems))


def _point(minute: float, utils: list[float], mems: list[float]) -> GpuPoint:
    return GpuPoint(minute, sum(utils) / len(utils), sum(mems) / len(mems) if mems else None)
