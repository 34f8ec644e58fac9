"""Reading a container's cgroup from the host: where its controllers live, its OOM counter,
its CPU time and memory (`task_usage`, for the metrics).

Works with cgroup v2 (one unified hierarchy at /sys/fs/cgroup) and with v1 or hybrid set-ups
(one mount per controller, found in /proc/self/mountinfo). A container's cgroup is the
`cgroupsPath` of its OCI config (`/gpuyard/<key>`), relative to each hierarchy's root.

Also holds the one piece of host set-up crun needs on hybrid v1 hosts: crun refuses to run
unless the hugetlb controller has a v1 mount (`ensure_hugetlb_mount`, idempotent, root only).
"""

from __future__ import annotations

import functools
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
MOUNTINFO = Path("/proc/self/mountinfo")
MOUNTS_TTL_S = 10.0
_mounts_cache: list = []  # [when read (monotonic), the mounts]
V2_CONTROLLERS = CGROUP_ROOT / "cgroup.controllers"


def is_v2() -> bool:
    """True on a pure cgroup v2 host (a unified hierarchy mounted at /sys/fs/cgroup)."""
    return V2_CONTROLLERS.exists()


def v1_mounts() -> dict[str, Path]:
    """Mount point of each cgroup v1 controller (`memory` → /sys/fs/cgroup/memory, ...),
    read again once `MOUNTS_TTL_S` passed (the node's readings ask once per task: parsing
    the mount table each time was a third of a 200-task server's GIL time)."""
    now = time.monotonic()
    if _mounts_cache and now - _mounts_cache[0] < MOUNTS_TTL_S:
        return dict(_mounts_cache[1])
    mounts = _read_v1_mounts()
    _mounts_cache[:] = [now, mounts]
    return dict(mounts)


def _read_v1_mounts() -> dict[str, Path]:
    mounts: dict[str, Path] = {}
    try:
        lines = MOUNTINFO.read_text().splitlines()
    except OSError:
        return mounts
    for line in lines:
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or len(tail) < 3 or tail[0] != "cgroup":
            continue
        for option in tail[2].split(","):
            mounts.setdefault(option, Path(fields[4]))
    return mounts


def controller_dir(controller: str, cgroup_path: str) -> Path | None:
    """The host dir of `cgroup_path` for `controller` (v1), or the unified dir (v2)."""
    relative = cgroup_path.strip("/")
    if is_v2():
        return CGROUP_ROOT / relative
    mount = v1_mounts().get(controller)
    return mount / relative if mount else None


def _read(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        return path.read_text()
    except OSError:
        return None


def _field(text: str | None, name: str) -> int | None:
    """The value of `name value` in a flat-keyed cgroup file (memory.events, oom_control)."""
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == name and parts[1].isdigit():
            return int(parts[1])
    return None


def oom_kill_count(cgroup_path: str) -> int:
    """How many processes the kernel OOM-killed in this cgroup (0 if unknown).

    v1: `memory.oom_control` field `oom_kill` (kernel 4.13+); v2: `memory.events` `oom_kill`.
    Must be read before the container is deleted: deleting removes the cgroup.
    """
    base = controller_dir("memory", cgroup_path)
    if base is None:
        return 0
    name = "memory.events" if is_v2() else "memory.oom_control"
    return _field(_read(base / name), "oom_kill") or 0


def pids_current(cgroup_path: str) -> int | None:
    text = _read(_path("pids", cgroup_path, "pids.current"))
    return int(text) if text and text.strip().isdigit() else None


def pids_max(cgroup_path: str) -> int | None:
    text = _read(_path("pids", cgroup_path, "pids.max"))
    return int(text) if text and text.strip().isdigit() else None


@dataclass(frozen=True, slots=True)
class CgroupUsage:
    """CPU time used so far (seconds) and memory in use now (bytes) of one cgroup."""

    cpu_seconds: float
    memory_bytes: int


def task_usage(cgroup_path: str) -> CgroupUsage | None:
    """The cgroup's CPU time and memory, or None where it does not exist on this host.

    v2: `cpu.stat` usage_usec and `memory.current`; v1: `cpuacct.usage` (ns) and
    `memory.usage_in_bytes`.
    """
    if is_v2():
        cpu_us = _field(_read(_path("cpu", cgroup_path, "cpu.stat")), "usage_usec")
        cpu_s = cpu_us / 1e6 if cpu_us is not None else None
        memory = _number(_read(_path("memory", cgroup_path, "memory.current")))
    else:
        cpu_ns = _number(_read(_path("cpuacct", cgroup_path, "cpuacct.usage")))
        cpu_s = cpu_ns / 1e9 if cpu_ns is not None else None
        memory = _number(_read(_path("memory", cgroup_path, "memory.usage_in_bytes")))
    if cpu_s is None and memory is None:
        return None
    return CgroupUsage(cpu_s or 0.0, memory or 0)


def _number(text: str | None) -> int | None:
    return int(text) if text and text.strip().isdigit() else None


def _path(controller: str, cgroup_path: str, name: str) -> Path | None:
    base = controller_dir(controller, cgroup_path)
    return base / name if base else None


@functools.cache
def swap_accounting() -> bool:
    """True when the memory controller can also limit swap (memsw on v1, swap.max on v2).

    A boot-time fact (`swapaccount=`), read once per process: every start asks."""
    if is_v2():
        return any(CGROUP_ROOT.glob("*/memory.swap.max"))
    mount = v1_mounts().get("memory")
    return bool(mount and (mount / "memory.memsw.limit_in_bytes").exists())


def hugetlb_mount_missing() -> bool:
    """True on a v1/hybrid host whose kernel has hugetlb but no v1 mount of it (crun fails)."""
    if is_v2() or "hugetlb" in v1_mounts():
        return False
    text = _read(Path("/proc/cgroups")) or ""
    return any(line.split()[:1] == ["hugetlb"] for line in text.splitlines())


def ensure_hugetlb_mount(target: Path = CGROUP_ROOT / "hugetlb") -> bool:
    """Mount the hugetlb v1 controller when it is missing; True if it mounted something.

    Needs root. Raises OSError with mount's message when the mount fails.
    """
    if not hugetlb_mount_missing():
        return False
    target.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "cgroup", "-o", "hugetlb", "cgroup", str(target)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if done.returncode != 0:
        raise OSError(f"cannot mount the hugetlb cgroup at {target}: {done.stderr.strip()}")
    return True
