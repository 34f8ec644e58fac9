"""A node's task network: every task in a network namespace of its own, on the node's bridge,
behind the node's nftables rules (docs/runtime.md, *Network*).

- **Addresses.** The node owns a task subnet (`NetConfig.subnet`, e.g. `10.213.0.0/24`; on a
  cluster a slice of the cluster's task network, `NetConfig.pool`). Its first address is the
  bridge `gpy-<tag>`; the CNI `bridge` plugin with `host-local` gives each namespace a veth on
  it and the next free address (`cni.py`). `<tag>` is 8 hex digits of the node's state root,
  so several nodes on one machine (the Ray tests) never share a name.
- **Claims.** The controller asks a node for its tasks' addresses before it starts them
  (`claim`: the job's env and hosts file name the peers' addresses): each task key gets a
  namespace from the spare pool (`netpool.py`), or a fresh one. `attach` puts the claimed
  namespace into the task's OCI config and writes `net.json` into its task dir, with the
  nftables elements that let it reach its job's peers (and the internet if its tenant may);
  its supervisor applies them while `crun create` runs (`begin_task_rules`) and removes
  everything before it records the exit (`teardown_task`). `release` does the same for a
  task that is removed, lost or never started, and `sweep` for what a crash left.
- **Rules.** `nftrules.py`: per job, not merely per tenant: a task reaches the tasks of its own
  job (on any node), and nothing else of the cluster.
- **Clusters.** `set_cluster` takes every node's (task subnet, address): the node routes the
  other subnets through their nodes and drops tasks' packets to any node's address.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import json
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuyard.runtime import cni, netclaims, netns, netroutes, nftrules
from gpuyard.runtime.netpool import NetnsPool
from gpuyard.runtime.taskdir import check_key, write_json
from gpuyard.runtime.types import TaskLaunch

log = logging.getLogger("gpuyard.runtime")

DEFAULT_SUBNET = "10.213.0.0/24"
SUBNET_ENV = "GPUYARD_TASK_SUBNET"
HOST = "host"  # TaskLaunch.network: the host's network namespace (hostNetwork: true)
NET_FILE = "net.json"  # in the task dir: its claim, namespace and rules
POOL_SIZE = 4  # spare namespaces per node (an idle one is a veth and a few KiB)
MAKE_AT_ONCE = 4  # a claim with no spare left makes this many in parallel (plugin execs)


class NetworkUnavailable(OSError):
    """The node cannot give tasks a network of their own (no plugins, no nft, a taken subnet)."""


@dataclass(frozen=True, slots=True)
class NetConfig:
    subnet: str  # this node's task subnet
    pool: str  # every node's task subnets together (the cluster's task network)
    spares: int = POOL_SIZE  # namespaces made ahead (0: each start makes its own)

    @classmethod
    def of(cls, subnet: str | None = None, pool: str | None = None) -> NetConfig:
        """Checked; `subnet` defaults to `$GPUYARD_TASK_SUBNET`, else DEFAULT_SUBNET, and
        `pool` to the subnet alone (one node). ValueError for a bad one."""
        net = ipaddress.IPv4Network(subnet or os.environ.get(SUBNET_ENV) or DEFAULT_SUBNET)
        whole = ipaddress.IPv4Network(pool) if pool else net
        if net.prefixlen > 29 or not net.subnet_of(whole):
            raise ValueError(f"task subnet {net} must be a /29 or larger inside {whole}")
        return cls(str(net), str(whole))


def node_tag(state_root: Path) -> str:
    return hashlib.sha256(os.fsencode(Path(state_root).resolve())).hexdigest()[:8]


class TaskNetworks:
    """The task network of the node whose state root is `state_root`."""

    def __init__(self, state_root: Path, tasks_dir: Path, config: NetConfig) -> None:
        tag = node_tag(state_root)
        self.config, self.tasks_dir = config, tasks_dir
        self.bridge, self.table, self.prefix = f"gpy-{tag}", nftrules.table_name(tag), f"gpy-{tag}-"
        self.dir = Path(state_root) / "net"
        self.claims, self.ipam = self.dir / "claims", self.dir / "ipam"
        self.cluster_file = self.dir / "cluster.json"
        self.cni = cni.bridge_config(f"gpuyard-{tag}", self.bridge, config.subnet, self.ipam)
        self.pool = NetnsPool(
            self.dir / "pool", self._make, netclaims.release_netns, config.spares, self._tick
        )
        self._lock = threading.Lock()
        self._ready = False

    # --- the node's side -------------------------------------------------------------------

    def ensure(self) -> None:
        """The node's network ready (rules applied, plugins found); once per process."""
        with self._lock:
            if self._ready:
                return
            try:
                self._set_up()
            except (OSError, ValueError) as e:
                raise NetworkUnavailable(f"no task network on this node: {e}") from e
            self._ready = True

    def _set_up(self) -> None:
        cni.plugin_dir()
        for d in (self.dir, self.claims, self.pool.dir, self.ipam):
            d.mkdir(mode=0o700, parents=True, exist_ok=True)
        taken = netroutes.conflict(self.config.subnet, self.bridge, self._cluster()["routes"])
        if taken:
            raise NetworkUnavailable(
                f"the task subnet {self.config.subnet} is already routed on this host ({taken}):"
                f" give this node another one (gpuyard up --task-subnet, ${SUBNET_ENV})"
            )
        mtu = netroutes.uplink_mtu()
        if mtu:
            self.cni = {**self.cni, "mtu": mtu}
        netroutes.ensure_bridge(self.bridge, mtu)
        for stale in nftrules.stale_tables(self.table):
            log.info("removing nftables tables %s of a task network that is gone", stale)
            nftrules.run(nftrules.drop_tables(stale))
        rules = nftrules.node_rules(self.table, self.bridge, self.config.subnet, self.config.pool)
        nftrules.run(rules + nftrules.nodes_rules(self.table, self._cluster()["nodes"]))

    def _make(self) -> netclaims.Record:
        return netclaims.make_netns(self.prefix, self.cni)

    def _tick(self) -> None:
        netclaims.sweep_claims(self.claims, self.tasks_dir)
        self.check_rules()

    def check_rules(self) -> bool:
        """With tasks running here and the node's tables gone, `restore` them; whether it
        had to (the pool's thread asks every 30 s)."""
        if not self._claimed_rules() or nftrules.tables_present(self.table):
            return False
        log.warning(
            "the task network's nftables tables %s are gone (a flushed ruleset?): "
            "applying them and the tasks' elements again",
            self.table,
        )
        self.restore()
        return True

    def _claimed_rules(self) -> list[str]:
        """The nftables elements of every task attached to a claimed namespace (one entry per
        task, "" for one without elements): empty when no task runs here."""
        records = (netclaims.read_record(p) for p in sorted(self.claims.glob("*.json")))
        return [str(r["up"]) for r in records if r is not None and "up" in r]

    def restore(self) -> None:
        """The node's rules and every running task's elements, applied again: when a node
        starts with tasks running, and when its tables vanished (`nft flush ruleset`, a
        firewall reload) while tasks ran, which would leave them unfenced until then."""
        with self._lock:
            self._ready = False
        self.ensure()
        nftrules.run("".join(self._claimed_rules()))

    def sweep(self) -> None:
        """What a crash left (a node starts): ended or never-started tasks' claims, and
        namespaces and leases of this node that no record names."""
        if not self.dir.exists():
            return  # never used here
        with contextlib.suppress(OSError):
            if self._claimed_rules():  # tasks run on: their fences, whatever happened meanwhile
                self.restore()
            gone = netclaims.sweep_claims(self.claims, self.tasks_dir)
            referenced = netclaims.referenced_netns(self.claims, self.pool.dir)
            gone += netclaims.sweep_unreferenced(self.prefix, referenced, self.cni, self.ipam)
            if gone:
                log.info("removed %d task network namespaces or leases left by a crash", gone)

    def close(self) -> None:
        """Stop the pool and tear its spares down, and the claims of tasks that never came
        (no start is on its way once the node closes); with no task left holding a namespace,
        the rules, routes and bridge go too (made again by the next task)."""
        self.pool.close()
        for record in self.pool.records():
            with contextlib.suppress(OSError):
                netclaims.release_netns(netclaims.read_record(record) or {})
                record.unlink()
        if not self.dir.exists():
            return
        netclaims.sweep_claims(self.claims, self.tasks_dir, orphan_after_s=0)
        if any(self.claims.glob("*.json")):
            return
        with contextlib.suppress(OSError):
            nftrules.run(nftrules.drop_tables(self.table))
            netroutes.apply({}, self._cluster()["routes"])
            self.cluster_file.unlink(missing_ok=True)
            if Path(f"/sys/class/net/{self.bridge}").exists():
                netroutes.delete_link(self.bridge)
        with self._lock:
            self._ready = False

    # --- tasks ----------------------------------------------------------------------------

    def claim(self, keys: list[str]) -> dict[str, str]:
        """Key → the address of the namespace claimed for it (the same one if asked again):
        a spare if there is one, else made now (several at once for a large job)."""
        self.ensure()
        paths = {key: self.claims / f"{check_key(key)}.json" for key in keys}
        missing = [p for p in paths.values() if not p.exists() and not self.pool.take(p)]
        if missing:
            with ThreadPoolExecutor(min(MAKE_AT_ONCE, len(missing))) as workers:
                list(workers.map(self._make_claim, missing))
        self.pool.wake()
        out = {}
        for key, path in paths.items():
            record = netclaims.read_record(path)
            if record is None:
                raise NetworkUnavailable(f"the network claim of {key} cannot be read")
            out[key] = str(record["address"])
        return out

    def _make_claim(self, path: Path) -> None:
        """A fresh namespace, recorded at `path` (removed again if it cannot be)."""
        record = self._make()
        try:
            write_json(path, record)
        except OSError:
            netclaims.release_netns(record)
            raise

    def attach(self, config: dict[str, Any], launch: TaskLaunch, task_dir: Path) -> None:
        """Put the task's namespace into its OCI `config`; write its rules into `net.json`."""
        if launch.network == HOST:
            return
        address = self.claim([launch.key])[launch.key]
        me = [p.address for p in launch.peers if (p.role, p.index) == (launch.role, launch.index)]
        if me and me[0] != address:
            raise NetworkUnavailable(
                f"task {launch.key} was told its address is {me[0]}, its namespace has {address}"
            )
        peers = [p.address for p in launch.peers]
        path = self.claims / f"{launch.key}.json"
        record = netclaims.read_record(path) or {}
        args = (self.table, address, peers, launch.allow_internet)
        up, down = nftrules.task_up(*args), nftrules.task_down(*args)
        write_json(path, {**record, "table": self.table, "up": up, "down": down})
        write_json(task_dir / NET_FILE, {"claim": str(path), "up": up, "address": address})
        join_netns(config, netns.path(str(record["netns"])))

    def release(self, key: str) -> None:
        """The task's namespace, veth, address and rules gone (nothing if it has none)."""
        netclaims.teardown_claim(self.claims / f"{check_key(key)}.json")

    # --- the cluster ------------------------------------------------------------------------

    def _cluster(self) -> dict[str, Any]:
        with contextlib.suppress(OSError, ValueError):
            value = json.loads(self.cluster_file.read_text())
            if isinstance(value, dict):
                return value
        return {"nodes": [], "routes": {}}

    def set_cluster(self, members: list[tuple[str, str]]) -> None:
        """Every node's (task subnet, address), this one's too: routes to the others' subnets
        through their addresses (none for a node of this same machine), and `@nodes`."""
        self.ensure()
        with self._lock:
            had = self._cluster()
            routes = {
                str(ipaddress.IPv4Network(subnet)): nftrules.ipv4(address)
                for subnet, address in members
                if subnet and subnet != self.config.subnet and not netroutes.is_local(address)
            }
            nodes = sorted({nftrules.ipv4(a) for _, a in members})
            if had == {"nodes": nodes, "routes": routes}:
                return
            nftrules.run(nftrules.nodes_rules(self.table, nodes))
            netroutes.apply(routes, had["routes"])
            write_json(self.cluster_file, {"nodes": nodes, "routes": routes})


def join_netns(config: dict[str, Any], path: str) -> None:
    """The OCI config joins the namespace at `path` (instead of a new, empty one)."""
    spaces = [n for n in config["linux"]["namespaces"] if n["type"] != "network"]
    config["linux"]["namespaces"] = [*spaces, {"type": "network", "path": path}]


# --- the supervisor's side ------------------------------------------------------------------


def _net_file(task_dir: Path) -> dict[str, Any] | None:
    with contextlib.suppress(OSError, ValueError):
        value = json.loads((task_dir / NET_FILE).read_text())
        return value if isinstance(value, dict) else None
    return None


def begin_task_rules(task_dir: Path) -> Any:
    """Start adding the task's rules (to be waited for with `end_task_rules` before the
    container is started); None for a task in the host's network or without peers."""
    net = _net_file(task_dir)
    return nftrules.start(net["up"]) if net and net.get("up") else None


def end_task_rules(proc: Any) -> None:
    if proc is not None:
        nftrules.finish(proc)


def teardown_task(task_dir: Path) -> None:
    """The task's rules, veth, address and namespace gone (once its container is)."""
    net = _net_file(task_dir)
    if net and net.get("claim"):
        netclaims.teardown_claim(Path(net["claim"]))
