"""Finding a node's GPUs: detected through NVML, or declared as fake GPUs.

Real GPUs come from the NVIDIA driver through `pynvml` (`discover_nvml_gpus`). Machines without
GPUs can declare fake ones (`parse_fake_gpus`, syntax `4xA100-80GB,2xV100`, `A100:4` or
`8xA100-80GB@4`) so that scheduling and the rest of the platform can be exercised; fake GPUs are
always `fake=True` and carry visibly fake UUIDs (`GPU-fake-<node>-<index>`). `detect_gpus` picks
between the two.

Both give each GPU a `topology_group`: GPUs that share an NVLink or PCIe-switch island share a
group, numbered 0.. in order of their lowest GPU index. NVML's answer is the connected components
of "NVLink peers or under one PCIe switch"; where NVML cannot tell, every group is None.
"""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import Iterable
from dataclasses import replace

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
_ISLAND = r"(?:\s*@\s*(?P<island>\d+))?"
_COUNT_X_TYPE = re.compile(rf"(?P<count>\d+)\s*[xX×]\s*(?P<type>{_TYPE}){_ISLAND}")
_TYPE_COLON_COUNT = re.compile(rf"(?P<type>{_TYPE})\s*:\s*(?P<count>\d+){_ISLAND}")
_MEMORY_PART = re.compile(r"(\d+)GB")
_NAME_PREFIXES = ("NVIDIA ", "Tesla ")


def parse_fake_gpus(text: str, node: str = "local") -> tuple[GpuDevice, ...]:
    """Fake GPUs declared as `4xA100-80GB`, `2xA100-80GB,2xV100`, `A100:4` or `8xA100-80GB@4`.

    Indices run 0..n-1 across the whole list. Each item is one topology island, or with `@N`
    islands of N GPUs (`8xA100@4`: GPUs 0-3 group 0, 4-7 group 1); groups count on across items.
    Raises ValueError for anything else.
    """
    entries = [_parse_entry(item, text) for item in text.split(",")]
    total = sum(count for count, _, _ in entries)
    if total > MAX_FAKE_GPUS:
        raise ValueError(
            f"too many fake GPUs: {total} declared in {text!r}, at most {MAX_FAKE_GPUS}"
        )
    types = [gpu_type for count, gpu_type, _ in entries for _ in range(count)]
    groups = _fake_groups(entries)
    return tuple(
        _fake_gpu(node, index, gpu_type, group)
        for index, (gpu_type, group) in enumerate(zip(types, groups, strict=True))
    )


def _fake_groups(entries: Iterable[tuple[int, str, int]]) -> list[int]:
    """The topology group of each declared GPU: islands of `island` GPUs, item after item."""
    groups: list[int] = []
    first = 0
    for count, _, island in entries:
        groups.extend(first + offset // island for offset in range(count))
        first += count // island
    return groups


def _parse_entry(item: str, text: str) -> tuple[int, str, int]:
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
    island = count if match["island"] is None else int(match["island"])
    if island < 1:
        raise ValueError(
            f"bad fake GPU list {text!r}: island size after @ must be at least 1, got {item!r}"
        )
    if count % island:
        raise ValueError(
            f"bad fake GPU list {text!r}: count {count} is not a multiple of island size"
            f" {island} in {item!r}"
        )
    return count, match["type"].upper(), island


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


def _fake_gpu(node: str, index: int, gpu_type: str, group: int) -> GpuDevice:
    return GpuDevice(
        index=index,
        uuid=fake_uuid(node, index),
        type=gpu_type,
        memory_mb=memory_mb_for_type(gpu_type),
        fake=True,
        minor=None,
        topology_group=group,
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

    A device whose queries fail (fallen off the bus, ...) is left out with a warning. Topology
    groups are None when NVML cannot answer the topology queries.
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
    devices, handles = [], []
    for index in range(pynvml.nvmlDeviceGetCount()):
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            devices.append(_nvml_device(index, handle))
            handles.append(handle)
        except pynvml.NVMLError as e:
            log.warning("NVML GPU %d left out: %s", index, e)
    groups = _nvml_topology_groups(handles)
    if groups is None:
        return tuple(devices)
    return tuple(replace(d, topology_group=g) for d, g in zip(devices, groups, strict=True))


def _nvml_device(index: int, handle: object) -> GpuDevice:
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


def _nvml_topology_groups(handles: list[object]) -> list[int] | None:
    """The island of each device (handles in index order), or None where NVML cannot tell."""
    try:
        links = [
            (i, j)
            for i, j in itertools.combinations(range(len(handles)), 2)
            if _nvml_same_island(handles[i], handles[j])
        ]
    except pynvml.NVMLError as e:
        log.info("GPU topology unknown, no topology groups: %s", e)
        return None
    return _connected_components(len(handles), links)


def _nvml_same_island(first: object, second: object) -> bool:
    """NVLink peers, or GPUs under one PCIe switch (or several, but no host bridge)."""
    nvlink = pynvml.nvmlDeviceGetP2PStatus(first, second, pynvml.NVML_P2P_CAPS_INDEX_NVLINK)
    if nvlink == pynvml.NVML_P2P_STATUS_OK:
        return True
    ancestor = pynvml.nvmlDeviceGetTopologyCommonAncestor(first, second)
    return ancestor <= pynvml.NVML_TOPOLOGY_MULTIPLE


def _connected_components(count: int, links: Iterable[tuple[int, int]]) -> list[int]:
    """Component of each of `count` nodes joined by `links`, numbered 0.. by lowest member."""
    parent = list(range(count))

    def root(node: int) -> int:
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for a, b in links:
        low, high = sorted((root(a), root(b)))
        parent[high] = low
    numbers: dict[int, int] = {}
    return [numbers.setdefault(root(node), len(numbers)) for node in range(count)]


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
