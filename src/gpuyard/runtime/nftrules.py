"""The nftables rules of a node's task network, in tables of gpuyard's own (run with `nft -f`).

Two tables per node, both named `gpuyard_<tag>` (the tag is the node's: `tasknet.py`), and
nothing else on the host is touched (no global chain is flushed, no other table read):

- `inet gpuyard_<tag>`, for what is routed or delivered to the host:
  - `input`: a task reaches nothing of the host: every packet from the node's bridge is
    dropped but replies (the API, the notify socket, every service bound to the host's
    addresses or 127.0.0.1 included; the bridge's own address too);
  - `output`: nothing on the host opens a connection into a task (a host-network task of
    another tenant included);
  - `forward`, from a task: IPv6 and link-local (169.254.0.0/16, the cloud metadata address)
    dropped; a pair in `@pairs` (a sibling of the same job, on this node or another) passes;
    any other task address (`pool`: every node's task subnet), every node of the cluster
    (`@nodes`), loopback, multicast and reserved addresses dropped; the rest (the internet)
    only from an address in `@internet` (its tenant allows it). Towards a task: a pair, or a
    reply;
  - `postrouting`: what leaves for outside the pool is masqueraded to the node's address.
- `bridge gpuyard_<tag>`: between two tasks of the node (bridged, not routed), IPv4 from the
  node's subnet passes only for a pair in `@pairs`, whether or not the host passes bridged
  traffic through iptables (`br_netfilter`). Matched by address, not by bridge (kernels
  without `NFT_BRIDGE_META` cannot match a bridge's name): a task cannot send from another
  address (no CAP_NET_RAW or CAP_NET_ADMIN), and has no IPv6 (`netns.disable_ipv6`).

A task's elements (`task_up`: its pairs with each peer, both ways, in both tables, and its
address in `@internet` where allowed) are added before its container starts and removed when
it ends (`task_down`: adds then deletes the same elements, so a second run deletes nothing and
still succeeds). The node's rules (`node_rules`) can be applied again at any time: chains are
flushed and refilled in one transaction, sets keep their elements (running tasks keep theirs).
"""

from __future__ import annotations

import ipaddress
import os
import re
import subprocess
from collections.abc import Iterable

TIMEOUT_S = 30.0
PRIORITY = -10  # before the usual filter chains (0): our drops come first, others still apply
BLOCKED = "0.0.0.0/8, 127.0.0.0/8, 224.0.0.0/3"  # this-host, loopback, multicast + reserved
LINK_LOCAL = "169.254.0.0/16"
BRIDGE_RE = re.compile(r"[a-z0-9-]{1,15}")
# a task's refused packet is answered (ICMP admin-prohibited, a TCP reset for TCP), so that its
# resolver or connect fails at once instead of after its timeouts; between two tasks of the node
# (bridged) it is dropped: kernels without NFT_BRIDGE_REJECT cannot answer there
REJECT = "reject with icmpx type admin-prohibited"


class NftError(OSError):
    """`nft` refused a ruleset; the message has its words."""


def table_name(tag: str) -> str:
    return f"gpuyard_{tag}"


def node_rules(table: str, bridge: str, subnet: str, pool: str) -> str:
    """The node's two tables (made if missing), their chains flushed and filled again."""
    t, b = f"inet {table}", f"bridge {table}"
    subnet, pool = str(ipaddress.IPv4Network(subnet)), str(ipaddress.IPv4Network(pool))
    if not BRIDGE_RE.fullmatch(bridge):
        raise ValueError(f"bad bridge name {bridge!r}")
    lines = [
        f"add table {t}",
        f"add set {t} pairs {{ type ipv4_addr . ipv4_addr; }}",
        f"add set {t} internet {{ type ipv4_addr; }}",
        f"add set {t} nodes {{ type ipv4_addr; }}",
        *_base_chain(t, "input", "filter hook input", PRIORITY),
        *_base_chain(t, "forward", "filter hook forward", PRIORITY),
        *_base_chain(t, "output", "filter hook output", PRIORITY),
        *_base_chain(t, "postrouting", "nat hook postrouting", 100 + PRIORITY),
        f"add chain {t} from_task",
        f"flush chain {t} from_task",
        f"add chain {t} to_task",
        f"flush chain {t} to_task",
        f'add rule {t} input iifname "{bridge}" ct state established,related accept',
        f'add rule {t} input iifname "{bridge}" {REJECT}',
        f'add rule {t} output oifname "{bridge}" ct state established,related accept',
        f'add rule {t} output oifname "{bridge}" drop',
        f'add rule {t} forward iifname "{bridge}" jump from_task',
        f'add rule {t} forward oifname "{bridge}" jump to_task',
        f"add rule {t} from_task meta nfproto ipv6 {REJECT}",
        f"add rule {t} from_task ip daddr {LINK_LOCAL} {REJECT}",
        f"add rule {t} from_task ip saddr . ip daddr @pairs accept",
        f"add rule {t} from_task ip daddr {pool} {REJECT}",
        f"add rule {t} from_task ip daddr @nodes {REJECT}",
        f"add rule {t} from_task ip daddr {{ {BLOCKED} }} {REJECT}",
        f"add rule {t} from_task ip saddr @internet accept",
        f"add rule {t} from_task {REJECT}",
        f"add rule {t} to_task ip saddr . ip daddr @pairs accept",
        f"add rule {t} to_task ct state established,related accept",
        f"add rule {t} to_task drop",
        f'add rule {t} postrouting ip saddr {subnet} ip daddr != {pool} oifname != "{bridge}" '
        "masquerade",
        f"add table {b}",
        f"add set {b} pairs {{ type ipv4_addr . ipv4_addr; }}",
        *_base_chain(b, "forward", "filter hook forward", PRIORITY),
        f"add rule {b} forward ip saddr {subnet} ip saddr . ip daddr @pairs accept",
        f"add rule {b} forward ip saddr {subnet} drop",
    ]
    return "\n".join(lines) + "\n"


def _base_chain(family_table: str, name: str, hook: str, priority: int) -> list[str]:
    spec = f"type {hook} priority {priority}; policy accept;"
    return [
        f"add chain {family_table} {name} {{ {spec} }}",
        f"flush chain {family_table} {name}",
    ]


def nodes_rules(table: str, addresses: Iterable[str]) -> str:
    """`@nodes` holds exactly `addresses` (the cluster's nodes: its control plane)."""
    items = ", ".join(sorted({ipv4(a) for a in addresses}))
    lines = [f"flush set inet {table} nodes"]
    if items:
        lines.append(f"add element inet {table} nodes {{ {items} }}")
    return "\n".join(lines) + "\n"


def _elements(table: str, address: str, peers: Iterable[str], internet: bool) -> list[str]:
    me = ipv4(address)
    others = sorted({ipv4(p) for p in peers} - {me})
    pairs = ", ".join(f"{a} . {b}" for p in others for a, b in ((me, p), (p, me)))
    out = []
    if pairs:
        out += [f"inet {table} pairs {{ {pairs} }}", f"bridge {table} pairs {{ {pairs} }}"]
    if internet:
        out.append(f"inet {table} internet {{ {me} }}")
    return out


def task_up(table: str, address: str, peers: Iterable[str], internet: bool) -> str:
    """A task's elements: its pairs with each of `peers`, and `@internet` if allowed."""
    return "".join(f"add element {e}\n" for e in _elements(table, address, peers, internet))


def task_down(table: str, address: str, peers: Iterable[str], internet: bool) -> str:
    """Remove what `task_up` added (an add first, so that it also succeeds a second time)."""
    elements = _elements(table, address, peers, internet)
    return "".join(f"add element {e}\n" for e in elements) + "".join(
        f"delete element {e}\n" for e in elements
    )


def drop_tables(table: str) -> str:
    """Both tables gone (made first, so that this succeeds when they are not there)."""
    return "".join(f"add table {f} {table}\ndelete table {f} {table}\n" for f in ("inet", "bridge"))


def ipv4(text: str) -> str:
    """`text` as a canonical IPv4 address; ValueError for anything else (no text gets into a
    ruleset that is not an address)."""
    return str(ipaddress.IPv4Address(text))


def run(text: str) -> None:
    """Apply `text` as one transaction (all of it or nothing)."""
    if text:
        finish(start(text))


def start(text: str) -> subprocess.Popen[bytes]:
    """Begin applying `text` (while, e.g., the container is being created); `finish` waits."""
    try:
        proc = subprocess.Popen(
            ["nft", "-f", "-"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
    except OSError as e:
        raise NftError(f"cannot run nft: {e}") from e
    assert proc.stdin is not None
    proc.stdin.write(text.encode())
    proc.stdin.close()
    return proc


def finish(proc: subprocess.Popen[bytes]) -> None:
    """Wait for `start`'s nft; NftError with its words if it refused the rules."""
    assert proc.stderr is not None
    try:
        proc.wait(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        proc.kill()
        proc.wait()
        raise NftError(f"nft did not finish in {TIMEOUT_S:g}s") from e
    finally:
        err = proc.stderr.read()
        proc.stderr.close()
    if proc.returncode != 0:
        raise NftError(f"nft refused the rules: {err.decode(errors='replace').strip()[:500]}")


def stale_tables(own: str) -> list[str]:
    """Other nodes' gpuyard tables whose bridge is gone (a node that died, or half cleaned):
    their subnet-keyed bridge rules would still drop the traffic of a node given that subnet
    later."""
    try:
        done = subprocess.run(
            ["nft", "list", "tables"],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    names = {line.split()[-1] for line in done.stdout.splitlines() if line.startswith("table")}
    return sorted(
        n
        for n in names
        if n.startswith("gpuyard_")
        and n != own
        and not os.path.exists(f"/sys/class/net/gpy-{n[len('gpuyard_') :]}")
    )


def tables_present(table: str) -> bool:
    """Whether the node's inet table `table` exists."""
    if not table:
        return False
    try:
        done = subprocess.run(
            ["nft", "list", "table", "inet", table],
            capture_output=True,
            timeout=TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0
