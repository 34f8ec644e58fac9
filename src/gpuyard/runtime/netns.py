"""Named network namespaces (`ip netns`): made, listed and removed by name under /run/netns.

A named namespace is a bind mount of an nsfs file at `/run/netns/<name>`: it lives on without
any process in it (so a task's namespace can be made before its container, and joined by path
in the OCI config) until `ip netns del` unmounts and unlinks it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

NETNS_DIR = Path("/run/netns")
TIMEOUT_S = 30.0
IPV6_SYSCTLS = Path("/proc/sys/net/ipv6")
DISABLE_IPV6 = ("net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")


class NetnsError(OSError):
    """`ip netns` failed; the message has its words."""


def path(name: str) -> str:
    return str(NETNS_DIR / name)


def add(name: str) -> str:
    """Make the namespace `name`; its path."""
    _ip("add", name)
    return path(name)


def delete(name: str) -> None:
    """Remove the namespace `name` if it is there."""
    if os.path.lexists(path(name)):
        _ip("delete", name)


def loopback_up(name: str) -> None:
    """`lo` up in the namespace (`ip netns add` leaves it down, and crun does not touch a
    namespace it joins): 127.0.0.1 and the task's own address answer inside it."""
    _run(["ip", "-n", name, "link", "set", "lo", "up"], f"lo up in {name}")


def disable_ipv6(name: str) -> None:
    """No IPv6 in the namespace (no fe80:: link-local address either), as Docker does for a
    container without IPv6; its interfaces must come after. Nothing on a host without IPv6."""
    if not IPV6_SYSCTLS.exists():
        return
    _run(["ip", "netns", "exec", name, "sysctl", "-q", "-w", *DISABLE_IPV6], f"IPv6 off in {name}")


def names(prefix: str) -> list[str]:
    """The namespaces whose name starts with `prefix`."""
    try:
        return sorted(n for n in os.listdir(NETNS_DIR) if n.startswith(prefix))
    except FileNotFoundError:
        return []


def _ip(command: str, name: str) -> None:
    _run(["ip", "netns", command, name], f"ip netns {command} {name}")


def _run(args: list[str], what: str) -> None:
    try:
        done = subprocess.run(args, capture_output=True, timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise NetnsError(f"{what}: {e}") from e
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip()
        raise NetnsError(f"{what} failed: {said[:300]}")
