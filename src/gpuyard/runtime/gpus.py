"""Finding a node's GPUs: detected through NVML, or declared as fake GPUs.

Real GPUs come from the NVIDIA driver through `pynvml` (`discover_nvml_gpus`). Machines without
GPUs can declare fake ones (`parse_fake_gpus`, syntax `4xA100-80GB,2xV100` or `A100:4`) so that
scheduling and the rest of the platform can be exercised; fake GPUs are always `fake=True` and
carry visibly fake UUIDs (`GPU-fake-<node>-<index>`). `detect_gpus` picks between the two.
"""

from __future__ import annotations

import logging
import re

import pynvml

from gpuyard.model import GpuDevice

log = logging.getLogger(__name__)

MB = 1024 * 1024
DEFAULT_MEMORY_MB = 16 * 1024
MAX_FAKE_GPUS = 1024

# Memory of well-known GPU types, for declared types without a `-<N>GB` part. A type matches a
# key when it equals it or starts with `<key>-` (`A100-SXM4` uses `A100`, `A10` is not `A100`).
KNOWN_MEMORY_MB: dict[str, int] = {
    "A100": 40 * 1024,
    "A10": 24 * 1024,
    "A10G": 24 * 1024,
    "A30": 24 * 1024,
    "A40": 48 * 1024,
    "A16": 16 * 1024,
    "A2": 16 * 1024,
    "H100": 80 * 1024,
    "H200": 141 * 1024,
    "B200": 180 * 1024,
    "V100": 16 * 1024,
    "V100S": 32 * 1024,
    "P100": 16 * 1024,
    "P40": 24 * 1024,
    "T4": 16 * 1024,
    "L4": 24 * 1024,
    "L40": 48 * 1024,
    "L40S": 48 * 1024,
    "RTX3090": 24 * 1024,
    "RTX4090": 24 * 1024,
    "RTX5090": 32 * 1024,
    "RTX6000": 48 * 1024,
    "RTX-A6000": 48 * 1024,
}

_TYPE = r"[A-Za-z0-9][A-Za-z0-9._-]*"
_COUNT_X_TYPE = re.compile(rf"(?P<count>\d+)\s*[xX×]\s*(?P<type>{_TYPE})")
_TYPE_COLON_COUNT = re.compile(rf"(?P<type>{_TYPE})\s*:\s*(?P<count>\d+)")
_MEMORY_PART = re.compile(r"(\d+)GB")
_NAME_PREFIXES = ("NVIDIA ", "Tesla ")


def parse_fake_gpus(text: str, node: str = "local") -> tuple[GpuDevice, ...]:
    """Fake GPUs declared as `4xA100-80GB`, `2xA100-80GB,2xV100` or `A100:4`.

    Indices run 0..n-1 across the whole list. Raises ValueError for anything else.
    """
    entries = [_parse_entry(item, text) for item in text.split(",")]
    total = sum(count for count, _ in entries)
    if total > MAX_FAKE_GPUS:
        raise ValueError(
            f"too many fake GPUs: {total} declared in {text!r}, at most {MAX_FAKE_GPUS}"
        )
    types = [gpu_type for count, gpu_type in entries for _ in range(count)]
    return tuple(_fake_gpu(node, index, gpu_type) for index, gpu_type in enumerate(types))


def _parse_entry(item: str, text: str) -> tuple[int, str]:
    item = item.strip()
    match = _COUNT_X_TYPE.fullmatch(item) or _TYPE_COLON_COUNT.fullmatch(item)
    if match is None:
        raise ValueError(
            f"bad fake GPU list {text!r}: expected COUNTxTYPE like 4xA100-80GB, got {item!r}"
            " (TYPE:COUNT like A100:4 works too)"
        )
    count = int(match["count"])
    if count < 1:
        raise ValueError(f"bad fake GPU list {text!r}: count must be at least 1, got {item!r}")
    return count, match["type"].upper()


def memory_mb_for_type(gpu_type: str) -> int:
    """Memory of a GPU type: its `-80GB` part, else the known-types table, else 16 GB."""
    for part in gpu_type.upper().split("-"):
        match = _MEMORY_PART.fullmatch(part)
        if match:
            return int(match[1]) * 1024
    return _known_memory_mb(gpu_type.upper()) or DEFAULT_MEMORY_MB


def _known_memory_mb(gpu_type: str) -> int | None:
    candidates = [k for k in KNOWN_MEMORY_MB if gpu_type == k or gpu_type.startswith(k + "-")]
    return KNOWN_MEMORY_MB[max(candidates, key=len)] if candidates else None


def fake_uuid(node: str, index: int) -> str:
    """A deterministic, visibly fake UUID: `GPU-fake-<node>-<index, 4 digits>`."""
    safe_node = re.sub(r"[^A-Za-z0-9.-]+", "-", node).strip("-") or "node"
    return f"GPU-fake-{safe_node}-{index:04d}"


def _fake_gpu(node: str, index: int, gpu_type: str) -> GpuDevice:
    return GpuDevice(
        index=index,
        uuid=fake_uuid(node, index),
        type=gpu_type,
        memory_mb=memory_mb_for_type(gpu_type),
        fake=True,
        minor=None,
    )


def normalize_gpu_name(name: str | bytes) -> str:
    """NVML's marketing name as a GPU type: `NVIDIA A100-SXM4-80GB` → `A100-SXM4-80GB`."""
    text = _text(name).strip()
    for prefix in _NAME_PREFIXES:
        if text.startswith(prefix):
            text = text[len(prefix) :].strip()
    return "-".join(text.split())


def _text(value: str | bytes) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def discover_nvml_gpus() -> tuple[GpuDevice, ...]:
    """The GPUs the NVIDIA driver reports, or `()` where there is no NVML library or driver.

    A device whose queries fail (fallen off the bus, ...) is left out with a warning.
    """
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:
        log.debug("no NVML GPUs: %s", e)
        return ()
    try:
        return _nvml_devices()
    except pynvml.NVMLError as e:
        log.warning("NVML GPU discovery failed: %s", e)
        return ()
    finally:
        _nvml_shutdown()


def _nvml_devices() -> tuple[GpuDevice, ...]:
    devices = []
    for index in range(pynvml.nvmlDeviceGetCount()):
        try:
            devices.append(_nvml_device(index))
        except pynvml.NVMLError as e:
            log.warning("NVML GPU %d left out: %s", index, e)
    return tuple(devices)


def _nvml_device(index: int) -> GpuDevice:
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    return GpuDevice(
        index=index,
        uuid=_text(pynvml.nvmlDeviceGetUUID(handle)),
        type=normalize_gpu_name(pynvml.nvmlDeviceGetName(handle)),
        memory_mb=int(pynvml.nvmlDeviceGetMemoryInfo(handle).total) // MB,
        fake=False,
        minor=_nvml_minor(handle),
    )


def _nvml_minor(handle: object) -> int | None:
    try:
        return int(pynvml.nvmlDeviceGetMinorNumber(handle))
    except pynvml.NVMLError_NotSupported:
        return None


def _nvml_shutdown() -> None:
    try:
        pynvml.nvmlShutdown()
    except pynvml.NVMLError as e:
        log.debug("nvmlShutdown failed: %s", e)


def detect_gpus(fake: str | None, node: str) -> tuple[GpuDevice, ...]:
    """Declared fake GPUs when `fake` is given (not None, not blank); else NVML's; else `()`."""
    if fake is not None and fake.strip():
        return parse_fake_gpus(fake, node)
    return discover_nvml_gpus()
