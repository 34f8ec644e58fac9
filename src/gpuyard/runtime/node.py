"""This machine as a gpuyard node: its usable CPUs, memory and GPUs.

CPUs are the ones this process may run on (`sched_getaffinity`), capped by a cgroup CPU quota;
memory is `/proc/meminfo` MemTotal, capped by a cgroup memory limit. Both cgroup v1 and v2 are
read, for this process's own cgroup and its ancestors (the tightest limit wins). The `proc`
arguments exist for tests: they point at a directory laid out like `/proc`.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from gpuyard.model import Node
from gpuyard.runtime.gpus import detect_gpus

PROC = Path("/proc")
MB = 1024 * 1024
UNLIMITED_BYTES = 2**62  # cgroup v1 writes "no limit" as a number near 2**63


def local_node(
    name: str | None = None,
    fake_gpus: str | None = None,
    reserve_cpu: float = 0.0,
    reserve_memory_mb: int = 0,
) -> Node:
    """This machine as a node, less the CPU and memory reserved for the system.

    `name` defaults to the hostname; `fake_gpus` (e.g. `4xA100-80GB`) declares fake GPUs
    instead of asking NVML. Raises ValueError for negative reserves or reserves that leave
    nothing.
    """
    if reserve_cpu < 0 or reserve_memory_mb < 0:
        raise ValueError(
            f"reserves must not be negative: cpu={reserve_cpu}, memory={reserve_memory_mb}MB"
        )
    node_name = name or socket.gethostname()
    cpus, memory_mb = available_cpus(), available_memory_mb()
    cpu_milli = round(cpus * 1000) - round(reserve_cpu * 1000)
    if cpu_milli <= 0:
        raise ValueError(f"reserve_cpu={reserve_cpu:g} leaves no CPU of this node's {cpus:g}")
    if memory_mb - reserve_memory_mb <= 0:
        raise ValueError(
            f"reserve_memory_mb={reserve_memory_mb} leaves no memory of this node's {memory_mb}MB"
        )
    gpus = detect_gpus(fake_gpus, node_name)
    return Node(node_name, cpu_milli, memory_mb - reserve_memory_mb, gpus)


def available_cpus(proc: Path = PROC) -> float:
    """CPUs this process may use: its CPU affinity, capped by a cgroup CPU quota."""
    cpus = float(len(os.sched_getaffinity(0)))
    limit = cgroup_cpu_limit(proc)
    return cpus if limit is None else min(cpus, limit)


def available_memory_mb(proc: Path = PROC) -> int:
    """Memory this process may use: MemTotal, capped by a cgroup memory limit."""
    total = meminfo_total_mb(proc)
    limit = cgroup_memory_limit_mb(proc)
    return total if limit is None else min(total, limit)


def meminfo_total_mb(proc: Path = PROC) -> int:
    match = re.search(r"^MemTotal:\s+(\d+)\s*kB", (proc / "meminfo").read_text(), re.MULTILINE)
    if match is None:
        raise RuntimeError(f"no MemTotal in {proc / 'meminfo'}")
    return int(match[1]) // 1024


def cgroup_cpu_limit(proc: Path = PROC) -> float | None:
    """The tightest CPU quota (in CPUs) over this process's cgroup and its ancestors, or None."""
    limits = [_cpu_limit_in(d) for d in _cgroup_dirs(proc, "cpu")]
    return min((limit for limit in limits if limit is not None), default=None)


def cgroup_memory_limit_mb(proc: Path = PROC) -> int | None:
    """The tightest memory limit (MB) over this process's cgroup and its ancestors, or None."""
    limits = [_memory_limit_in(d) for d in _cgroup_dirs(proc, "memory")]
    return min((limit // MB for limit in limits if limit is not None), default=None)


def _cpu_limit_in(directory: Path) -> float | None:
    cpu_max = _read(directory / "cpu.max")  # v2: "max 100000" or "150000 100000"
    if cpu_max is not None:
        quota, _, period = cpu_max.partition(" ")
        return _ratio(quota, period)
    return _ratio(_read(directory / "cpu.cfs_quota_us"), _read(directory / "cpu.cfs_period_us"))


def _ratio(quota: str | None, period: str | None) -> float | None:
    try:
        q, p = int(quota or ""), int(period or "")
    except ValueError:  # "max", missing files
        return None
    return q / p if q > 0 and p > 0 else None


def _memory_limit_in(directory: Path) -> int | None:
    for name in ("memory.max", "memory.limit_in_bytes"):  # v2, v1
        value = _read(directory / name)
        if value is not None:
            return int(value) if value.isdigit() and int(value) < UNLIMITED_BYTES else None
    return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


@dataclass(frozen=True, slots=True)
class _CgroupMount:
    root: str  # the cgroup path that the mount point shows
    mount_point: Path
    v2: bool
    controllers: frozenset[str]  # v1 only


def _cgroup_dirs(proc: Path, controller: str) -> list[Path]:
    """Directories of this process's cgroup and its ancestors in each hierarchy that may hold
    `controller`'s limits: the v1 hierarchy of that controller and the v2 one."""
    mounts = _cgroup_mounts(proc)
    dirs: list[Path] = []
    for hierarchy_id, controllers, path in _process_cgroups(proc):
        v2 = hierarchy_id == "0"
        if not v2 and controller not in controllers:
            continue
        for mount in mounts:
            if mount.v2 == v2 and (v2 or controller in mount.controllers):
                dirs.extend(_chain(mount, path))
                break
    return dirs


def _chain(mount: _CgroupMount, path: str) -> list[Path]:
    """`path`'s directory under `mount` and its parents up to the mount point; [] if not shown."""
    relative = _relative_cgroup(mount.root, path)
    if relative is None:
        return []
    parts = PurePosixPath(relative).parts
    return [mount.mount_point.joinpath(*parts[:n]) for n in range(len(parts), -1, -1)]


def _relative_cgroup(root: str, path: str) -> str | None:
    root = root.rstrip("/")
    if path == root or path == root + "/":
        return ""
    if path.startswith(root + "/"):
        return path[len(root) + 1 :]
    return None


def _process_cgroups(proc: Path) -> list[tuple[str, frozenset[str], str]]:
    """(hierarchy id, controllers, cgroup path) per line of /proc/self/cgroup."""
    text = _read(proc / "self" / "cgroup") or ""
    rows = []
    for line in text.splitlines():
        hierarchy_id, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        rows.append((hierarchy_id, frozenset(filter(None, controllers.split(","))), path))
    return rows


def _cgroup_mounts(proc: Path) -> list[_CgroupMount]:
    text = _read(proc / "self" / "mountinfo") or ""
    return [m for m in map(_parse_mountinfo_line, text.splitlines()) if m is not None]


def _parse_mountinfo_line(line: str) -> _CgroupMount | None:
    # id parent major:minor root mount-point options [optional...] - fstype source super-options
    fields = line.split()
    if "-" not in fields[6:]:
        return None
    sep = fields.index("-", 6)
    fstype, super_options = fields[sep + 1], fields[sep + 3] if len(fields) > sep + 3 else ""
    if fstype not in ("cgroup", "cgroup2"):
        return None
    return _CgroupMount(
        root=_unescape(fields[3]),
        mount_point=Path(_unescape(fields[4])),
        v2=fstype == "cgroup2",
        controllers=frozenset(super_options.split(",")) if fstype == "cgroup" else frozenset(),
    )


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes (`\\040`)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), field)
