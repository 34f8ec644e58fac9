"""Live readings of this host's GPUs from NVML: utilisation, memory, temperature, power.

`NvmlSampler` initialises NVML once (lazily, on first use) and keeps it open; where there is no
NVML library or driver it answers no samples and remembers that, so callers pay nothing on
GPU-less hosts. Fake GPUs are never sampled: they have no NVML. Every call is serialised by a
lock, so the controller (idle-GPU checks) and a metrics scrape can share one sampler.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

import pynvml

from gpuyard.model import GpuDevice

log = logging.getLogger(__name__)

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One GPU's readings; a reading NVML cannot give (not supported) is None."""

    index: int
    uuid: str
    model: str  # NVML's name, as dcgm-exporter's modelName: "NVIDIA A100-SXM4-80GB"
    minor: int | None
    util_pct: float | None
    fb_used_mib: float | None
    fb_free_mib: float | None
    temp_c: float | None
    power_w: float | None


class NvmlSampler:
    """Samples this host's GPUs through NVML; `available` is False where there is no NVML."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state: bool | None = None  # None: not tried; True: initialised; False: no NVML

    @property
    def available(self) -> bool:
        with self._lock:
            return self._ready()

    def samples(self) -> list[GpuSample]:
        """Every GPU NVML reports on this host (a GPU whose queries fail is left out)."""
        with self._lock:
            if not self._ready():
                return []
            try:
                count = pynvml.nvmlDeviceGetCount()
            except pynvml.NVMLError as e:
                log.warning("NVML device count failed: %s", e)
                return []
            return [s for s in (_sample(i) for i in range(count)) if s is not None]

    def utilization(self, gpu: GpuDevice) -> float | None:
        """The GPU's utilisation in percent; None for a fake GPU or one NVML does not know."""
        if gpu.fake:
            return None
        for s in self.samples():
            if s.uuid == gpu.uuid:
                return s.util_pct
        return None

    def close(self) -> None:
        with self._lock:
            if self._state:
                try:
                    pynvml.nvmlShutdown()
                except pynvml.NVMLError as e:
                    log.debug("nvmlShutdown failed: %s", e)
            self._state = None

    def _ready(self) -> bool:
        if self._state is None:
            try:
                pynvml.nvmlInit()
                self._state = True
            except pynvml.NVMLError as e:
                log.debug("no NVML, no GPU samples: %s", e)
                self._state = False
        return self._state


def _sample(index: int) -> GpuSample | None:
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        uuid = _text(pynvml.nvmlDeviceGetUUID(handle))
        model = _text(pynvml.nvmlDeviceGetName(handle))
    except pynvml.NVMLError as e:
        log.warning("NVML GPU %d not sampled: %s", index, e)
        return None
    memory = _optional(pynvml.nvmlDeviceGetMemoryInfo, handle)
    util = _optional(pynvml.nvmlDeviceGetUtilizationRates, handle)
    temp = _optional(pynvml.nvmlDeviceGetTemperature, handle, pynvml.NVML_TEMPERATURE_GPU)
    power_mw = _optional(pynvml.nvmlDeviceGetPowerUsage, handle)
    return GpuSample(
        index=index,
        uuid=uuid,
        model=model,
        minor=_optional(pynvml.nvmlDeviceGetMinorNumber, handle),
        util_pct=float(util.gpu) if util is not None else None,
        fb_used_mib=memory.used / MIB if memory is not None else None,
        fb_free_mib=memory.free / MIB if memory is not None else None,
        temp_c=float(temp) if temp is not None else None,
        power_w=power_mw / 1000 if power_mw is not None else None,
    )


def _optional(query, *args):  # noqa: ANN001, ANN202 - any NVML query
    try:
        return query(*args)
    except pynvml.NVMLError:
        return None


def _text(value: str | bytes) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
