"""Task networks in tests: each test gets task subnets of its own, and leaves none behind.

Tasks get a network namespace of their own on their node's bridge (`runtime/tasknet.py`), from
the node's task subnet. Tests run one after another, often next to other test runs on the same
machine, and a runtime a test forgets to close keeps its bridge: so every test gets a random
/24 (`GPUYARD_TASK_SUBNET`, for ContainerRuntime and `gpuyard up`) and /16 (`GPUYARD_TASK_NETWORK`,
a Ray cluster's) of 10.128.0.0/9, and after it whatever gpuyard left on them is removed: the
nodes' namespaces, nftables tables and bridges (found by the bridge's address).
"""

from __future__ import annotations

import ipaddress
import json
import os
import random
import subprocess
from pathlib import Path

SYS_NET = Path("/sys/class/net")
NETNS = Path("/run/netns")


def random_subnets() -> tuple[str, str]:
    """A /24 and a /16 of 10.128.0.0/9, not overlapping each other."""
    second = random.randrange(128, 255)
    other = random.choice([n for n in range(128, 255) if n != second])
    return f"10.{second}.{random.randrange(256)}.0/24", f"10.{other}.0.0/16"


def _bridge_nets(name: str) -> list[ipaddress.IPv4Network]:
    done = subprocess.run(["ip", "-j", "-4", "addr", "show", "dev", name],
                          capture_output=True, text=True, check=False)
    nets = []
    for link in json.loads(done.stdout or "[]"):
        for a in link.get("addr_info", []):
            nets.append(ipaddress.IPv4Network(f"{a['local']}/{a['prefixlen']}", strict=False))
    return nets


def node_tags_in(*subnets: str) -> list[str]:
    """Tags of the gpuyard bridges whose address lies in one of `subnets`."""
    if os.geteuid() != 0 or not SYS_NET.exists():
        return []
    wanted = [ipaddress.IPv4Network(s) for s in subnets]
    tags = []
    for link in sorted(SYS_NET.glob("gpy-*")):
        if any(n.subnet_of(w) for n in _bridge_nets(link.name) for w in wanted):
            tags.append(link.name[len("gpy-"):])
    return tags


def remove_node_network(tag: str) -> None:
    """The node's namespaces, its nftables tables and its bridge, gone."""
    for ns in sorted(NETNS.glob(f"gpy-{tag}-*")) if NETNS.exists() else []:
        subprocess.run(["ip", "netns", "del", ns.name], capture_output=True, check=False)
    for family in ("inet", "bridge"):
        subprocess.run(["nft", "delete", "table", family, f"gpuyard_{tag}"],
                       capture_output=True, check=False)
    subprocess.run(["ip", "link", "del", f"gpy-{tag}"], capture_output=True, check=False)
