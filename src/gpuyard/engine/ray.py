"""The Ray engine: the nodes of a Ray cluster, each with a detached agent actor that runs tasks.

`gpuyard up --engine ray://HEAD:PORT` connects to the cluster's GCS at HEAD:PORT (the address
`ray start --head` prints) as a driver in the namespace `gpuyard`; the control plane runs on a
machine that is a Ray node (usually the head). Then, in a background thread:

- every `refresh_s` it reads `ray.nodes()` (`raynodes.py` names them and reads their size) and
  makes sure each live node has its agent: the actor named `agent-<node>`, found with
  `ray.get_actor` (one left by an earlier control plane is adopted as it is) or created
  detached, pinned to the node (hard `NodeAffinitySchedulingStrategy`), with zero CPUs and
  restarted by Ray if its process dies; nodes that left are dropped at once;
- every `poll_s` it asks each agent for the status of all its tasks, keeps the answers, and
  wakes the controller when one changed (the `watch` hint).

A task on a node that is no longer in the cluster has no status: `status` raises
`NodeUnavailable` and the controller ends the task `NodeLost`. An agent that does not answer in
time on a live node is `AgentUnreachable`: no news, ask again; a live node that has had no
working agent for `AGENT_GRACE_S` counts as lost too.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from gpuyard.engine.base import AgentUnreachable, NodeUnavailable
from gpuyard.engine.nodemetrics import gather_readings
from gpuyard.engine.rayagent import AgentActor
from gpuyard.engine.raynodes import RayNode, live_nodes
from gpuyard.engine.raystreams import RayNodeStreams, RayStreamsBook
from gpuyard.engine.subnets import DEFAULT_NETWORK, SubnetBook
from gpuyard.model import Node
from gpuyard.runtime.nodereadings import NodeReadings
from gpuyard.runtime.types import TaskLaunch, TaskStatus

log = logging.getLogger("gpuyard.engine.ray")

NAMESPACE = "gpuyard"
SCHEME = "ray://"
AGENT_CONCURRENCY = 16  # calls one agent serves at once (starts, log reads, status polls)
CALL_TIMEOUT_S = 10.0
# a start writes the task dir and forks its supervisor: an image that is not ready is pulled
# and unpacked in the node's background (runtime/pulls.py), never within the call
START_TIMEOUT_S = 30.0
AGENT_READY_TIMEOUT_S = 60.0
AGENT_GRACE_S = 60.0  # a live node without a working agent this long: its tasks are lost


def parse_engine(text: str) -> str | None:
    """`local` → None; `ray://HOST:PORT` → `HOST:PORT`. ValueError for anything else."""
    value = text.strip()
    if value == "local":
        return None
    if value.startswith(SCHEME):
        host, _, port = value[len(SCHEME) :].rpartition(":")
        if host and port.isdigit() and 0 < int(port) < 65536:
            return f"{host}:{port}"
    raise ValueError(
        f"--engine must be 'local' or 'ray://HOST:PORT' (the GCS address that "
        f"'ray start --head' prints, e.g. ray://10.0.0.1:6379), got {text!r}"
    )


def _same(member: _Member | None, node: RayNode) -> bool:
    return member is not None and member.node_id == node.node_id


def agent_name(node: str) -> str:
    return f"agent-{node}"


@dataclass(frozen=True)
class RayEngineConfig:
    address: str  # HOST:PORT of the cluster's GCS
    node_root: str  # each node's storage root, unless $GPUYARD_NODE_ROOT is set there
    oci_runtime: str | None = None
    refresh_s: float = 2.0
    poll_s: float = 1.0
    task_network: str = DEFAULT_NETWORK  # each node's task subnet is a /24 of it (subnets.py)
    init_options: dict[str, Any] = field(default_factory=dict)  # more `ray.init` arguments


@dataclass(frozen=True)
class _Member:
    node: Node  # with its GPUs, from its agent
    node_id: str
    actor: Any  # the agent's ActorHandle
    runtime: str


class RayEngine:
    name = "ray"

    def __init__(self, config: RayEngineConfig) -> None:
        self._config = config
        if not ray.is_initialized():
            ray.init(
                address=config.address,
                namespace=NAMESPACE,
                log_to_driver=False,
                logging_level=logging.WARNING,
                **config.init_options,
            )
        self._lock = threading.Lock()
        self._members: dict[str, _Member] = {}
        self._agentless: dict[str, float] = {}  # live in Ray, no working agent: since when
        self._statuses: dict[str, dict[str, TaskStatus]] = {}
        self._subnets = SubnetBook(Path(config.node_root) / "subnets.json", config.task_network)
        self._cluster: list[tuple[str, str]] = []  # what the agents were last told (set_cluster)
        self._on_change: Callable[[], None] | None = None
        self._streams = RayStreamsBook(NAMESPACE, config.node_root)
        self._halt = threading.Event()
        self.refresh()
        self._thread = threading.Thread(target=self._run, name="gpuyard-ray", daemon=True)
        self._thread.start()

    @property
    def runtime_name(self) -> str:
        with self._lock:
            names = sorted({m.runtime for m in self._members.values()})
        return ", ".join(names) or "none yet"

    # ---- membership ------------------------------------------------------------------

    def nodes(self) -> list[Node]:
        with self._lock:
            return [m.node for m in sorted(self._members.values(), key=lambda m: m.node.name)]

    def refresh(self) -> None:
        """Read the Ray cluster's nodes; give each new one its agent, drop those that left."""
        live = live_nodes(ray.nodes())
        with self._lock:
            known = dict(self._members)
        members = self._reread({n.name: known[n.name] for n in live if _same(known.get(n.name), n)})
        joining = [(n, self._agent(n)) for n in live if n.name not in members]
        for node, actor in joining:  # the new agents start in parallel; wait for each
            member = self._join(node, actor)
            if member is not None:
                members[node.name] = member
        now = time.monotonic()
        with self._lock:
            left = set(self._members) - set(members)
            joined = set(members) - set(self._members)
            self._members = members
            self._agentless = {
                n.name: self._agentless.get(n.name, now) for n in live if n.name not in members
            }
            for name in left:
                self._statuses.pop(name, None)
        for name in sorted(left):
            log.warning("node %s left the Ray cluster; its tasks are lost", name)
        for name in sorted(joined):
            log.info("node %s joined (%s)", name, members[name].node.address)
        self._tell_cluster(members, bool(joined))
        if (left or joined) and self._on_change:
            self._on_change()

    def _tell_cluster(self, members: dict[str, _Member], joined: bool) -> None:
        """Every agent learns every node's (task subnet, address), when that changed or a node
        joined: it routes to the others' task subnets and keeps its tasks off their addresses."""
        for m in members.values():
            self._subnets.saw(m.node.name, m.node.task_subnet)
        cluster = sorted((m.node.task_subnet or "", m.node.address) for m in members.values())
        if cluster == self._cluster and not joined:
            return
        self._cluster = cluster
        for name, m in members.items():
            try:
                ray.get(m.actor.set_cluster.remote(cluster), timeout=CALL_TIMEOUT_S)
            except Exception as e:  # told again at the next refresh
                log.warning("node %s could not take the cluster's task routes: %s", name, e)
                self._cluster = []

    def _reread(self, members: dict[str, _Member]) -> dict[str, _Member]:
        """The members with their inventories read again (GPU health changes while a node
        lives); an agent that does not answer keeps its last inventory until the poll, which
        decides about unreachable agents, says otherwise."""
        refs = {name: m.actor.inventory.remote() for name, m in members.items()}
        fresh = dict(members)
        for name, ref in refs.items():
            try:
                fresh[name] = replace(members[name], node=ray.get(ref, timeout=CALL_TIMEOUT_S))
            except (RayActorError, GetTimeoutError) as e:
                log.warning("agent of %s did not report its inventory: %s", name, e)
        return fresh

    def _join(self, node: RayNode, actor: Any) -> _Member | None:
        """The node's agent (adopted or created) and its inventory; None if it is not ready."""
        if actor is None:
            return None
        try:
            ready = [actor.node_id.remote(), actor.inventory.remote(), actor.runtime_name.remote()]
            node_id, inventory, runtime = ray.get(ready, timeout=AGENT_READY_TIMEOUT_S)
            if node_id != node.node_id:  # an agent of the node's earlier life: replace it
                ray.kill(actor, no_restart=True)
                return None
        except (RayActorError, GetTimeoutError, ValueError) as e:
            log.warning("node %s has no working agent yet: %s", node.name, e)
            return None
        return _Member(inventory, node.node_id, actor, runtime)

    def _agent(self, node: RayNode) -> Any:
        """The node's agent actor: the live one of that name, else a new one (None: failed)."""
        name = agent_name(node.name)
        try:
            return ray.get_actor(name, namespace=NAMESPACE)
        except ValueError:  # none alive by that name: make it
            pass
        try:
            return self._create_agent(node, name)
        except Exception as e:  # a node Ray cannot place an actor on is not usable yet
            log.warning("cannot create the agent of node %s: %s", node.name, e)
            return None

    def _create_agent(self, node: RayNode, name: str) -> Any:
        subnet = self._subnets.of(node.name)
        base = Node(
            node.name, node.cpu_milli, node.memory_mb, address=node.address, task_subnet=subnet
        )
        options = {
            "name": name,
            "namespace": NAMESPACE,
            "lifetime": "detached",
            "get_if_exists": True,
            "num_cpus": 0,
            "max_concurrency": AGENT_CONCURRENCY,
            "max_restarts": -1,
            "scheduling_strategy": NodeAffinitySchedulingStrategy(node.node_id, soft=False),
        }
        actor_class = ray.remote(AgentActor)
        return actor_class.options(**options).remote(
            base,
            node.fake_gpus,
            self._config.node_root,
            self._config.oci_runtime,
            self._config.task_network,
        )

    def _member(self, node: str) -> _Member:
        with self._lock:
            member = self._members.get(node)
            agentless_since = self._agentless.get(node)
        if member is not None:
            return member
        if agentless_since is not None and time.monotonic() - agentless_since < AGENT_GRACE_S:
            raise AgentUnreachable(f"node {node} is in the Ray cluster but its agent is not ready")
        if agentless_since is not None:
            raise NodeUnavailable(f"node {node} has had no working agent for {AGENT_GRACE_S:g}s")
        raise NodeUnavailable(f"node {node} is not part of the Ray cluster (left or lost)")

    # ---- the background thread: membership and task statuses ----------------------------

    def _run(self) -> None:
        since_refresh = 0.0
        while not self._halt.wait(self._config.poll_s):
            since_refresh += self._config.poll_s
            try:
                if since_refresh >= self._config.refresh_s:
                    since_refresh = 0.0
                    self.refresh()
                self._poll()
            except Exception:  # the next round tries again
                log.exception("Ray engine refresh failed")

    def _poll(self) -> None:
        with self._lock:
            members = list(self._members.values())
        pending = {m.node.name: m.actor.statuses.remote() for m in members}
        changed = False
        for name, ref in pending.items():
            try:
                statuses = ray.get(ref, timeout=CALL_TIMEOUT_S)
            except (RayActorError, GetTimeoutError) as e:
                log.warning("agent of %s did not answer: %s", name, e)
                continue
            with self._lock:
                before = self._statuses.get(name, {})
                self._statuses[name] = statuses
            changed |= {k: s.phase for k, s in before.items()} != {
                k: s.phase for k, s in statuses.items()
            }
        if changed and self._on_change:
            self._on_change()

    # ---- the Engine interface ---------------------------------------------------------

    def _call(self, node: str, method: str, *args: Any, timeout: float = CALL_TIMEOUT_S) -> Any:
        member = self._member(node)
        try:
            return ray.get(getattr(member.actor, method).remote(*args), timeout=timeout)
        except (RayActorError, GetTimeoutError) as e:
            raise AgentUnreachable(f"the agent of node {node} did not answer: {e}") from e
        except RayTaskError as e:  # the agent's own error (LaunchInvalid, ImageError, ...),
            cause = e.cause  # without Ray's remote traceback in its message
            if isinstance(cause, Exception):
                raise cause from None
            raise

    def claim_addresses(self, node: str, keys: list[str]) -> dict[str, str]:
        return self._call(node, "claim_addresses", keys, timeout=START_TIMEOUT_S)

    def start(self, node: str, launch: TaskLaunch) -> str | None:
        return self._call(node, "start", launch, timeout=START_TIMEOUT_S)

    def node_names(self) -> list[str]:
        with self._lock:
            return sorted(self._members)

    def image_op(self, node: str, op: str, *args: Any) -> Any:
        """An operation on the node's image store, by its agent (`engine/nodeimages.py`); an
        import or a gc may take as long as a start."""
        return self._call(node, "image_op", op, *args, timeout=START_TIMEOUT_S)

    def status(self, node: str, key: str) -> TaskStatus:
        self._member(node)
        with self._lock:
            known = self._statuses.get(node, {}).get(key)
        return known if known is not None else self._call(node, "status", key)

    def stop(self, node: str, key: str, grace_s: float) -> None:
        self._call(node, "stop", key, grace_s)

    def read_log(self, node: str, key: str, offset: int, limit: int) -> bytes:
        return self._call(node, "read_log", key, offset, limit)

    def tail_log(self, node: str, key: str, lines: int) -> str:
        return self._call(node, "tail_log", key, lines)

    def log_dropped(self, node: str, key: str) -> int:
        return self._call(node, "log_dropped", key)

    def log_size(self, node: str, key: str) -> int:
        return self._call(node, "log_size", key)

    def streams(self, node: str) -> RayNodeStreams:
        """The node's exec and port streams, served by an actor of their own (raystreams.py)."""
        return self._streams.of(node, self._member(node).node_id)

    def release(self, node: str, key: str) -> None:
        self._call(node, "release", key)
        with self._lock:
            self._statuses.get(node, {}).pop(key, None)

    def held_tasks(self, node: str) -> list[str]:
        """From the node's last poll (every task its agent holds)."""
        self._member(node)  # NodeUnavailable for a node that is gone
        with self._lock:
            return sorted(self._statuses.get(node, {}))

    def readings(self, timeout_s: float) -> dict[str, NodeReadings | None]:
        with self._lock:
            actors = {name: m.actor for name, m in self._members.items()}
        return gather_readings(actors, timeout_s)

    def watch(self, on_change: Callable[[], None]) -> None:
        self._on_change = on_change

    def close(self) -> None:
        """Stop watching and disconnect; the agents and their tasks keep running."""
        self._halt.set()
        self._thread.join(timeout=10)
        ray.shutdown()
