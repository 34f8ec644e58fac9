"""The node-wide pids limit: one `pids.max` on gpuyard's parent cgroup (`/gpuyard`), above
every task's own limit, so that all tasks of a node together never take the host's last pids.

Each task has a pids limit of its own (`TaskLaunch.pids_limit`, 4096 by default), but nothing
bounded their sum: two tasks reached 25 % of this host's `pid_max` (32768). The kernel's pids
controller is hierarchical, so a limit on `/gpuyard` caps every `/gpuyard/<key>` together. The
limit is the node's capacity (the lower of `kernel.pid_max` and `kernel.threads-max`: a thread
takes a pid too) minus a reserve for the host (`reserve`: 10 % of it, at least 4096), set when
the node's runtime starts (`fence_node_pids`, idempotent; a later start with other sysctls sets
the new value). cgroup v1 (the `pids` hierarchy) and v2 (the unified one, where the root's
`cgroup.subtree_control` must hand `pids` down; it is enabled there when missing).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from gpuyard.runtime.cgroups import CGROUP_ROOT, controller_dir, is_v2

log = logging.getLogger("gpuyard.runtime")

PID_MAX = Path("/proc/sys/kernel/pid_max")
THREADS_MAX = Path("/proc/sys/kernel/threads-max")
RESERVE_MIN = 4096
RESERVE_FRACTION = 10  # percent of the capacity kept for the host


@dataclass(frozen=True, slots=True)
class PidFence:
    """What `fence_node_pids` set: the limit, on which file, and why that number."""

    limit: int
    path: Path
    capacity: int


def node_capacity(pid_max: Path = PID_MAX, threads_max: Path = THREADS_MAX) -> int:
    """How many tasks (processes and threads) this node can have at once."""
    return min(int(pid_max.read_text()), int(threads_max.read_text()))


def reserve(capacity: int) -> int:
    """The pids kept for the host: 10 % of the capacity, at least 4096 (never all of it)."""
    return min(capacity - 1, max(RESERVE_MIN, capacity * RESERVE_FRACTION // 100))


def default_limit() -> int:
    capacity = node_capacity()
    return capacity - reserve(capacity)


def _enable_v2_pids() -> None:
    """Hand the pids controller down from the v2 root to its children (if not yet)."""
    control = CGROUP_ROOT / "cgroup.subtree_control"
    if "pids" not in control.read_text().split():
        control.write_text("+pids")


def fence_node_pids(parent: str, limit: int | None = None) -> PidFence:
    """Set `pids.max` of the cgroup `parent` (made if missing) to `limit` (None: the node's
    capacity minus the reserve); what was set. OSError where the host has no pids controller
    or this process may not write it."""
    capacity = node_capacity()
    value = default_limit() if limit is None else limit
    if value < 1:
        raise ValueError(f"a pids limit must be at least 1, not {value}")
    if is_v2():
        _enable_v2_pids()
    base = controller_dir("pids", parent)
    if base is None:
        raise OSError(f"no pids cgroup controller is mounted: {parent} cannot be limited")
    base.mkdir(parents=True, exist_ok=True)
    path = base / "pids.max"
    if path.read_text().strip() != str(value):
        path.write_text(str(value))
    return PidFence(value, path, capacity)


def try_fence_node_pids(parent: str, limit: int | None = None) -> PidFence | None:
    """`fence_node_pids`, logged; None (and a warning) where it cannot be set."""
    try:
        fence = fence_node_pids(parent, limit)
    except OSError as e:
        log.warning("no node-wide pids limit on %s: %s", parent, e)
        return None
    log.info("node-wide pids limit: %s = %d (capacity %d)", fence.path, fence.limit, fence.capacity)
    return fence
