"""Device nodes in a container's OCI config: `linux.devices` and the device cgroup allow list.

Every container's device cgroup denies everything, then allows the set that runc and crun
allow by default (null, zero, full, random, urandom, tty, console, ptmx, the pts devices), and
nothing else unless a device node is added with `add_device`: the node is created in the
container's /dev (`linux.devices`, major/minor as on the host) *and* its major:minor is
allowed (`linux.resources.devices`). A device that is not in the list cannot be opened even
when a node for it turns up in the container (an image's own `/dev`-like node, say): open(2)
fails with EPERM.

`host_device` reads a host node with os.stat; `nvidia_nodes` names the nodes of a set of
NVIDIA GPUs under a device root (`/dev` on a real node, a dir of `mknod`-made nodes in tests).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuyard.model import GpuDevice

Config = dict[str, Any]

# The devices runc and crun allow in every container (runc's specconv.AllowedDevices, less
# its `mknod` wildcards: the task has no CAP_MKNOD anyway). -1 is the OCI wildcard (omitted).
DEFAULT_ALLOWED: tuple[tuple[str, int, int], ...] = (
    ("c", 1, 3),  # /dev/null
    ("c", 1, 5),  # /dev/zero
    ("c", 1, 7),  # /dev/full
    ("c", 1, 8),  # /dev/random
    ("c", 1, 9),  # /dev/urandom
    ("c", 5, 0),  # /dev/tty
    ("c", 5, 1),  # /dev/console
    ("c", 5, 2),  # /dev/ptmx
    ("c", 136, -1),  # /dev/pts/*
)
CONTROL_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
NVIDIA_GPU_NODE = "nvidia"  # /dev/nvidia<minor>


@dataclass(frozen=True, slots=True)
class DeviceNode:
    """One device node: its path in the container, the host node it copies, its numbers."""

    path: str
    host_path: str
    type: str  # c, b, u or p, as in the OCI spec
    major: int
    minor: int
    file_mode: int
    access: str = "rwm"


class DeviceError(Exception):
    """A device node is missing on the host, or is not a device."""


def device_type(mode: int) -> str | None:
    if stat.S_ISCHR(mode):
        return "c"
    if stat.S_ISBLK(mode):
        return "b"
    return "p" if stat.S_ISFIFO(mode) else None


def host_device(host_path: str | Path, path: str, access: str = "rwm") -> DeviceNode:
    """The node `host_path` (stat'ed, symlinks followed) to appear at `path` in the container."""
    try:
        st = os.stat(host_path)
    except OSError as e:
        raise DeviceError(f"device node {host_path} is missing on this node: {e.strerror}") from e
    kind = device_type(st.st_mode)
    if kind is None:
        raise DeviceError(f"{host_path} is not a device node")
    return DeviceNode(
        path=path,
        host_path=str(host_path),
        type=kind,
        major=os.major(st.st_rdev),
        minor=os.minor(st.st_rdev),
        file_mode=stat.S_IMODE(st.st_mode),
        access=access,
    )


def gpu_node_name(minor: int) -> str:
    return f"{NVIDIA_GPU_NODE}{minor}"


def nvidia_nodes(gpus: Iterable[GpuDevice], dev_root: Path) -> list[DeviceNode]:
    """`/dev/nvidia<minor>` of each GPU (required), then the control nodes that exist."""
    nodes = [
        host_device(dev_root / gpu_node_name(g.minor), f"/dev/{gpu_node_name(g.minor)}")
        for g in gpus
        if g.minor is not None
    ]
    for name in CONTROL_NODES:
        if (dev_root / name).exists():
            nodes.append(host_device(dev_root / name, f"/dev/{name}"))
    return nodes


def is_gpu_node(path: str) -> int | None:
    """The minor of a `/dev/nvidia<N>` container path, else None."""
    prefix = f"/dev/{NVIDIA_GPU_NODE}"
    digits = path[len(prefix) :]
    return int(digits) if path.startswith(prefix) and digits.isdigit() else None


def cgroup_rule(kind: str, major: int, minor: int, access: str = "rwm") -> dict[str, Any]:
    """An allow rule of `linux.resources.devices`; -1 stands for the wildcard."""
    rule: dict[str, Any] = {"allow": True, "type": kind}
    if major >= 0:
        rule["major"] = major
    if minor >= 0:
        rule["minor"] = minor
    rule["access"] = access
    return rule


def default_cgroup_devices() -> list[dict[str, Any]]:
    """Deny all, then allow runc's default set."""
    return [{"allow": False, "access": "rwm"}] + [
        cgroup_rule(kind, major, minor) for kind, major, minor in DEFAULT_ALLOWED
    ]


def oci_device(node: DeviceNode, uid: int, gid: int) -> dict[str, Any]:
    """A `linux.devices` entry; owned by the task's user, as CDI does for a non-root user."""
    return {
        "path": node.path,
        "type": node.type,
        "major": node.major,
        "minor": node.minor,
        "fileMode": node.file_mode,
        "uid": uid,
        "gid": gid,
    }


def remove_device(config: Config, path: str) -> None:
    linux = config.setdefault("linux", {})
    linux["devices"] = [d for d in linux.get("devices", []) if d.get("path") != path]


def add_device(config: Config, node: DeviceNode) -> None:
    """Create `node` in the container (replacing one at the same path) and allow it."""
    remove_device(config, node.path)
    user = config.get("process", {}).get("user", {})
    config["linux"]["devices"].append(oci_device(node, user.get("uid", 0), user.get("gid", 0)))
    if node.type in ("c", "b", "u"):  # u: an unbuffered char device
        kind = "b" if node.type == "b" else "c"
        allow(config, cgroup_rule(kind, node.major, node.minor, node.access or "rwm"))


def allow(config: Config, rule: dict[str, Any]) -> None:
    """Append an allow rule to the device cgroup list, once."""
    resources = config["linux"].setdefault("resources", {})
    rules = resources.setdefault("devices", default_cgroup_devices())
    if rule not in rules:
        rules.append(rule)
