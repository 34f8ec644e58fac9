"""The utilisation of every node's GPUs, for the idle-GPU checks (idle.py) and the nodes page.

A background thread asks the engine for every node's readings (each node's agent reads its own
NVML) every `refresh_s`, waiting at most `timeout_s`, and keeps each GPU's utilisation with the
time it was read; the controller's cycle never waits on a node. A reading older than `max_age_s`
(its node stopped answering) counts as none, which makes the GPU's job ineligible for the idle
checks rather than idle on old numbers. GPUs are found by UUID, which NVML makes unique.

The same readings fill each GPU's last hour (`gpuhistory.py`: per-minute means of utilisation
and memory in use) for the portal's cluster page (`last_hour`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from gpuyard.controller.gpuhistory import GpuHistory, GpuPoint
from gpuyard.engine import Engine
from gpuyard.model import GpuDevice
from gpuyard.runtime.gpustats import GpuSample

log = logging.getLogger(__name__)

REFRESH_S = 5.0
TIMEOUT_S = 2.0
MAX_AGE_S = 15.0


class GpuReadings:
    def __init__(
        self,
        engine: Engine,
        refresh_s: float = REFRESH_S,
        timeout_s: float = TIMEOUT_S,
        max_age_s: float = MAX_AGE_S,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self._engine = engine
        self.refresh_s = refresh_s
        self._timeout_s = timeout_s
        self._max_age_s = max_age_s
        self._now = now
        self._util: dict[str, tuple[float, float]] = {}  # GPU UUID → (%, when read)
        self._history = GpuHistory()
        self._lock = threading.Lock()
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None

    def utilization(self, gpu: GpuDevice) -> float | None:
        """The GPU's last utilisation (%); None if fake, never read, or read too long ago."""
        if gpu.fake:
            return None
        with self._lock:
            found = self._util.get(gpu.uuid)
        if found is None or self._now() - found[1] > self._max_age_s:
            return None
        return found[0]

    def last_hour(self, uuid: str) -> list[tuple[float, GpuPoint]]:
        """The GPU's minutes of the last hour, oldest first, each with its age in seconds."""
        now = self._now()
        return [(now - p.at, p) for p in self._history.points(uuid, now)]

    def refresh(self) -> None:
        """Read every node now; a node that does not answer keeps its older readings, which
        age out."""
        answers = self._engine.readings(self._timeout_s)
        at = self._now()
        samples = [
            s
            for node in answers.values()
            if node is not None
            for s in node.gpus
            if s.util_pct is not None
        ]
        with self._lock:
            kept = {u: r for u, r in self._util.items() if at - r[1] <= self._max_age_s}
            self._util = kept | {s.uuid: (s.util_pct, at) for s in samples}
        for s in samples:
            self._history.add(s.uuid, at, s.util_pct, _memory_pct(s))
        self._history.forget_before(at)

    def start(self) -> None:
        self._halt.clear()
        self._thread = threading.Thread(target=self._run, name="gpuyard-gpu-readings", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._halt.set()
        if self._thread is not None:
            self._thread.join(timeout=self._timeout_s + 5)

    def _run(self) -> None:
        while True:
            try:
                self.refresh()
            except Exception:  # an engine that failed this time is asked again next time
                log.exception("reading the nodes' GPUs failed")
            if self._halt.wait(self.refresh_s):
                return


def _memory_pct(s: GpuSample) -> float | None:
    if s.fb_used_mib is None or s.fb_free_mib is None or s.fb_used_mib + s.fb_free_mib <= 0:
        return None
    return 100 * s.fb_used_mib / (s.fb_used_mib + s.fb_free_mib)
