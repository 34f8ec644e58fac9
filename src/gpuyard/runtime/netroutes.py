"""The host's routing table as the task network sees it: conflicts, the uplink, routes to the
other nodes' task subnets (the routed multi-node design: each node owns a subnet of the
cluster's task network and reaches the others' through their node addresses; no overlay).

Only routes for subnets of the task network are ever added or removed here (`ip route replace
SUBNET via NODE` in the main table), each one recorded by its caller, so a host's own routes are
never touched.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import socket
import subprocess
from collections.abc import Mapping
from pathlib import Path

TIMEOUT_S = 30.0


class RouteError(OSError):
    """`ip route` failed, or the task subnet is already the host's."""


def _ip(*args: str) -> str:
    try:
        done = subprocess.run(["ip", *args], capture_output=True, timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RouteError(f"ip {' '.join(args)}: {e}") from e
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip()
        raise RouteError(f"ip {' '.join(args)} failed: {said[:300]}")
    return done.stdout.decode()


def routes() -> list[dict[str, object]]:
    """The main table's IPv4 routes (`ip -j`)."""
    value = json.loads(_ip("-j", "-4", "route", "show", "table", "main") or "[]")
    return [r for r in value if isinstance(r, dict)]


def conflict(subnet: str, bridge: str, ours: Mapping[str, str]) -> str | None:
    """What already routes part of `subnet` other than the node's bridge and the routes we
    added (`ours`: subnet → via); None if nothing does."""
    net = ipaddress.IPv4Network(subnet)
    for r in routes():
        dst = str(r.get("dst", ""))
        if dst == "default" or r.get("dev") == bridge or dst in ours:
            continue
        with contextlib.suppress(ValueError):
            if ipaddress.IPv4Network(dst, strict=False).overlaps(net):
                return f"{dst} dev {r.get('dev')}"
    return None


def uplink_mtu() -> int | None:
    """The MTU of the default route's interface (the tasks' veths get it: what leaves the
    node, to the internet or to another node, fits without fragments)."""
    with contextlib.suppress(RouteError, ValueError, OSError):
        for r in routes():
            if r.get("dst") == "default" and r.get("dev"):
                return int(Path(f"/sys/class/net/{r['dev']}/mtu").read_text())
    return None


def is_local(address: str) -> bool:
    """Whether `address` is one of this host's own (a node of the same machine: its task
    subnet is on a bridge of this host, no route needed)."""
    try:
        with socket.socket() as s:
            s.bind((address, 0))
    except OSError:
        return False
    return True


def apply(wanted: Mapping[str, str], had: Mapping[str, str]) -> None:
    """Routes `subnet via address` for `wanted`; those of `had` not wanted any more go."""
    for subnet, via in sorted(wanted.items()):
        if had.get(subnet) != via:
            _ip("route", "replace", str(ipaddress.IPv4Network(subnet)), "via", via)
    for subnet in sorted(set(had) - set(wanted)):
        with contextlib.suppress(RouteError):  # already gone
            _ip("route", "del", str(ipaddress.IPv4Network(subnet)), "via", had[subnet])


def ensure_bridge(name: str, mtu: int | None) -> None:
    """The node's bridge, up (made here, not by the first CNI ADD, so that the node's tables
    never exist without it: a gpuyard table without its bridge is a dead node's)."""
    if Path(f"/sys/class/net/{name}").exists():
        return
    _ip("link", "add", name, *(("mtu", str(mtu)) if mtu else ()), "type", "bridge")
    _ip("link", "set", name, "up")


def delete_link(name: str) -> None:
    """Remove the interface `name` (the node's bridge, once no task uses it)."""
    _ip("link", "del", name)
