"""GPU health from NVML: a GPU that reports trouble is marked unhealthy, with the cause.

Checked for each real GPU of the node (`NvmlHealth.check`, at most every `interval_s`):

- fallen off the bus: any query answers `NVML_ERROR_GPU_IS_LOST` → `lost (fallen off the bus)`;
- XID critical errors, read from an NVML event set registered for every GPU → `XID 79`;
  XIDs that an application causes (13, 31, 43, 45, 68, 109: the list the Kubernetes NVIDIA
  device plugin skips) are not held against the GPU;
- ECC: volatile uncorrectable errors → `ECC: 3 uncorrectable errors`; retired pages pending
  (the GPU needs a reset) → `retired pages pending`. Queries a GPU does not support are skipped.

A verdict is sticky: the GPU stays unhealthy until the node agent restarts (after the GPU was
reset or replaced), so it never flaps in and out of scheduling. Fake GPUs are never checked.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import replace

import pynvml

from gpuyard.model import GpuDevice

log = logging.getLogger(__name__)

APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})
LOST = "lost (fallen off the bus)"


class NvmlHealth:
    """Sticky health verdicts of a node's real GPUs, by UUID; NVML stays initialised while
    this lives (its event set needs it), `close` ends that."""

    def __init__(self, interval_s: float = 5.0, now: Callable[[], float] = time.monotonic):
        self.interval_s = interval_s
        self._now = now
        self._checked_at = float("-inf")
        self._causes: dict[str, str] = {}
        self._events: object | None = None
        self._ready = False

    def check(self, gpus: tuple[GpuDevice, ...]) -> tuple[GpuDevice, ...]:
        """`gpus` with `healthy` and `health_cause` set from what NVML reports."""
        real = [g for g in gpus if not g.fake]
        if real and self._now() - self._checked_at >= self.interval_s:
            self._checked_at = self._now()
            try:
                self._check(real)
            except pynvml.NVMLError as e:
                log.warning("GPU health check failed: %s", e)
        return tuple(self._verdict(g) for g in gpus)

    def _verdict(self, gpu: GpuDevice) -> GpuDevice:
        cause = self._causes.get(gpu.uuid)
        return replace(gpu, healthy=False, health_cause=cause) if cause else gpu

    def _check(self, gpus: list[GpuDevice]) -> None:
        if not self._ready:
            pynvml.nvmlInit()
            self._ready = True
            self._events = _event_set(gpus)
        by_uuid = {g.uuid: g for g in gpus}
        for g in gpus:
            if g.uuid not in self._causes:
                cause = _device_fault(g)
                if cause:
                    self._mark(g, cause)
        for uuid, xid in _xid_events(self._events):
            if uuid in by_uuid and xid not in APPLICATION_XIDS:
                self._mark(by_uuid[uuid], f"XID {xid}")

    def _mark(self, gpu: GpuDevice, cause: str) -> None:
        if gpu.uuid not in self._causes:
            log.error("GPU %d (%s) is unhealthy: %s", gpu.index, gpu.uuid, cause)
            self._causes[gpu.uuid] = cause

    def close(self) -> None:
        if self._ready:
            if self._events is not None:
                with contextlib.suppress(pynvml.NVMLError):
                    pynvml.nvmlEventSetFree(self._events)
            pynvml.nvmlShutdown()
            self._ready = False


def _device_fault(gpu: GpuDevice) -> str | None:
    """Why NVML says this GPU is broken, or None."""
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(gpu.index)
        pynvml.nvmlDeviceGetUUID(handle)
        ecc = _supported(
            lambda: pynvml.nvmlDeviceGetTotalEccErrors(
                handle, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC
            )
        )
        pending = _supported(lambda: pynvml.nvmlDeviceGetRetiredPagesPendingStatus(handle))
    except pynvml.NVMLError_GpuIsLost:
        return LOST
    if ecc:
        return f"ECC: {ecc} uncorrectable error{'s' if ecc != 1 else ''}"
    if pending:
        return "retired pages pending (the GPU needs a reset)"
    return None


def _supported(query: Callable[[], int]) -> int:
    try:
        return int(query())
    except (pynvml.NVMLError_NotSupported, pynvml.NVMLError_FunctionNotFound):
        return 0


def _event_set(gpus: list[GpuDevice]) -> object | None:
    """An event set with every GPU that supports it registered for XID critical errors."""
    try:
        events = pynvml.nvmlEventSetCreate()
    except (pynvml.NVMLError_NotSupported, pynvml.NVMLError_FunctionNotFound):
        return None
    for g in gpus:
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(g.index)
            pynvml.nvmlDeviceRegisterEvents(handle, pynvml.nvmlEventTypeXidCriticalError, events)
        except pynvml.NVMLError as e:
            log.info("GPU %d: no XID events: %s", g.index, e)
    return events


def _xid_events(events: object | None, limit: int = 1000) -> list[tuple[str, int]]:
    """(GPU UUID, XID) of the events waiting in the set, without waiting for more."""
    out: list[tuple[str, int]] = []
    while events is not None and len(out) < limit:
        try:
            data = pynvml.nvmlEventSetWait_v2(events, 0)
        except pynvml.NVMLError_Timeout:
            break
        if data.eventType & pynvml.nvmlEventTypeXidCriticalError:
            try:
                uuid = pynvml.nvmlDeviceGetUUID(data.device)
            except pynvml.NVMLError:
                continue
            out.append((uuid.decode() if isinstance(uuid, bytes) else uuid, int(data.eventData)))
    return out
