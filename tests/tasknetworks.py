"""Task networks in tests: each test gets task subnets of its own, and leaves none behind.

Tasks get a network namespace of their own on their node's bridge (`runtime/tasknet.py`), from
the node's task subnet. Tests run one after another, often next to other test runs on the same
machine, and a runtime a test forgets to close keeps its bridge: so every test gets a random
/24 of 10.128.0.0/10 (`GPUYARD_TASK_SUBNET`, for ContainerRuntime and `gpuyard up`) and /16 of
10.192.0.0/10 (`GPUYARD_TASK_NETWORK`, a Ray cluster's), and after it what its own nodes left
is removed: the namespaces, nftables tables and bridges named by the tags of the nodes whose
state roots lie under the test's tmp dir (`nodes_under`), never another test run's.
"""

from __future__ import annotations

import os
import random
import socket
import struct
import subprocess
from ipaddress import IPv4Network, ip_network
from pathlib import Path

from gpuyard.runtime.tasknet import node_tag

NETNS = Path("/run/netns")


def random_subnets() -> tuple[str, str]:
    """A /24 of 10.128.0.0/10 (one node) and a /16 of 10.192.0.0/10 (a cluster), none routed
    here yet (another test's bridge, or one a crashed run left), and each pytest-xdist worker
    in its own quarter of both ranges (`make test` runs several: they pick at the same time)."""
    lane = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0) % 4
    routed = _routes()
    for _ in range(64):
        subnet = ip_network(
            f"10.{128 + 4 * random.randrange(16) + lane}.{random.randrange(256)}.0/24"
        )
        network = ip_network(f"10.{192 + 4 * random.randrange(15) + lane}.0.0/16")
        if not any(r.overlaps(subnet) or r.overlaps(network) for r in routed):
            break
    return str(subnet), str(network)


def _routes() -> list[IPv4Network]:
    """This network namespace's IPv4 routes but the default one (/proc/net/route: hex,
    little-endian)."""
    out = []
    for line in Path("/proc/net/route").read_text().splitlines()[1:]:
        fields = line.split()
        dest, mask = (
            socket.inet_ntoa(struct.pack("<I", int(f, 16))) for f in (fields[1], fields[7])
        )
        if mask != "0.0.0.0":
            out.append(IPv4Network(f"{dest}/{mask}", strict=False))
    return out


def nodes_under(root: Path, depth: int = 4) -> list[str]:
    """Tags of the nodes whose state root lies under `root` and that made a task network."""
    found = [
        p.parent
        for d in range(depth)
        for p in root.glob("/".join(["*"] * d + ["net"]))
        if p.is_dir()
    ]
    return sorted({node_tag(state_root) for state_root in found})


def remove_node_network(tag: str) -> None:
    """The node's namespaces, its nftables tables and its bridge, gone."""
    for ns in sorted(NETNS.glob(f"gpy-{tag}-*")) if NETNS.exists() else []:
        subprocess.run(["ip", "netns", "del", ns.name], capture_output=True, check=False)
    for family in ("inet", "bridge"):
        subprocess.run(
            ["nft", "delete", "table", family, f"gpuyard_{tag}"], capture_output=True, check=False
        )
    subprocess.run(["ip", "link", "del", f"gpy-{tag}"], capture_output=True, check=False)
