"""`gpuyard up`: assemble the platform (store, engine, controller, API) and serve it.

The engine is `local` (this machine is the only node, its agent in this process) or
`ray://HEAD:PORT` (the nodes of a Ray cluster, an agent actor on each: `engine/ray.py`).
"""

from __future__ import annotations

import logging
import os
import secrets
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import uvicorn
from fastapi import FastAPI

from gpuyard.api import create_app
from gpuyard.api.services.bootstrap import token_file, write_secret
from gpuyard.api.services.logstreams import DEFAULT_FOLLOWS_PER_USER, LogStreams
from gpuyard.controller import Controller
from gpuyard.controller.gpureadings import GpuReadings
from gpuyard.controller.launch import DEFAULT_PORT_RANGE
from gpuyard.controller.leader import Leadership
from gpuyard.controller.lease import LEASE_TTL_S
from gpuyard.controller.standby import HandoverEngine
from gpuyard.engine import Engine, LocalEngine, NodeAgent
from gpuyard.engine.ray import RayEngine, RayEngineConfig, parse_engine
from gpuyard.engine.subnets import DEFAULT_NETWORK
from gpuyard.leading import (
    Takeover,
    build_leadership,
    lock_if_sqlite,
    server_address,
    server_id,
)
from gpuyard.model import Node, SystemClock
from gpuyard.runtime.executor import ContainerRuntime
from gpuyard.runtime.gpuhealth import NvmlHealth
from gpuyard.runtime.hostport import listen_socket
from gpuyard.runtime.node import local_node
from gpuyard.runtime.privatedir import private_dir
from gpuyard.runtime.tasknet import NetConfig
from gpuyard.store import open_store

log = logging.getLogger("gpuyard")

# a file holding the token Prometheus must send to /metrics (unset: <data dir>/metrics-token)
METRICS_TOKEN_FILE_ENV = "GPUYARD_METRICS_TOKEN_FILE"
METRICS_TOKEN_FILE = "metrics-token"
SWITCH_INTERVAL_S = 0.001  # the GIL's switch interval (Python's default: 5 ms), see serve()


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "gpuyard"


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8080
    data_dir: Path = default_data_dir()
    fake_gpus: str | None = None
    fake_gpus_if_none: str | None = None
    node_name: str | None = None
    oci_runtime: str | None = None
    stop_grace_s: float = 10.0
    pids_limit: int = 4096
    cycle_interval_s: float = 0.5
    db_url: str | None = None
    storage_roots: tuple[str, ...] = ()  # of the default tenant made on first start
    metrics_token_file: Path | None = None  # default: $GPUYARD_METRICS_TOKEN_FILE, if set
    metrics_open: bool = False  # /metrics for anyone, without job and user labels
    log_follows_per_user: int = DEFAULT_FOLLOWS_PER_USER  # logs?follow=true open at once
    engine: str = "local"  # or ray://HEAD:PORT
    task_ports: tuple[int, int] = DEFAULT_PORT_RANGE  # ports reserved for tasks on each node
    task_subnet: str | None = None  # this machine's tasks' addresses (None: the default)
    task_network: str = DEFAULT_NETWORK  # a Ray cluster's: each node gets a /24 of it
    lease_ttl_s: float = LEASE_TTL_S  # PostgreSQL: a leader acts this long after a heartbeat


def build_node(cfg: ServerConfig) -> Node:
    node = local_node(cfg.node_name, cfg.fake_gpus)
    if not node.gpus and cfg.fake_gpus_if_none and not cfg.fake_gpus:
        node = local_node(cfg.node_name, cfg.fake_gpus_if_none)
    return node


def metrics_token(cfg: ServerConfig) -> str | None:
    """The scrape token of /metrics, read from its file (`--metrics-token-file`, else
    $GPUYARD_METRICS_TOKEN_FILE, else `<data dir>/metrics-token`, made 0600 on first start);
    None with `--metrics-open`."""
    if cfg.metrics_open:
        return None
    path = cfg.metrics_token_file or os.environ.get(METRICS_TOKEN_FILE_ENV)
    if not path:
        path = cfg.data_dir / METRICS_TOKEN_FILE
        if not path.exists():
            write_secret(path, secrets.token_urlsafe(32))
            log.info("made the scrape token of /metrics: %s", path)
    token = Path(path).read_text().strip()
    if not token:
        raise ValueError(f"the metrics token file {path} is empty")
    return token


def secure_dir(path: Path) -> None:
    """`path` a dir only the server's uid may enter (0700); a looser one is tightened, and
    the log says so."""
    was = private_dir(path)
    if was is not None:
        log.warning("%s had mode %o; set to 0700 (it holds secrets)", path, was)


def build_controller(cfg: ServerConfig) -> tuple[Controller, GpuReadings, Leadership]:
    """The controller, the reader of every node's GPU utilisation it watches idle GPUs with
    (to be started and stopped with it), and this server's leadership (docs/ha.md): the
    engine is built when this server is elected (`leading.Takeover`); until then it touches
    no node."""
    secure_dir(cfg.data_dir)
    lock_fd = lock_if_sqlite(cfg.data_dir, cfg.db_url)  # SQLite: one server per data dir
    clock = SystemClock()
    store = open_store(cfg.data_dir, cfg.db_url, clock)
    engine = HandoverEngine(store, clock, "local" if parse_engine(cfg.engine) is None else "ray")
    gpus = GpuReadings(engine)
    controller = Controller(
        store,
        engine,
        clock,
        interval_s=cfg.cycle_interval_s,
        stop_grace_s=cfg.stop_grace_s,
        pids_limit=cfg.pids_limit,
        gpu_utilization=gpus.utilization,
        port_range=cfg.task_ports,
    )
    address = server_address(cfg.host, cfg.port)
    holder = server_id(cfg.port)
    leadership = build_leadership(controller, cfg.db_url, lock_fd, address, holder, cfg.lease_ttl_s)
    return controller, gpus, leadership


def build_engine(cfg: ServerConfig) -> Engine:
    """This machine as the only node, or the Ray cluster at `cfg.engine` (each node's tasks
    under `<data dir>/nodes/<node>` there, unless the node sets $GPUYARD_NODE_ROOT)."""
    address = parse_engine(cfg.engine)
    if address is None:
        secure_dir(cfg.data_dir / "node")
        network = NetConfig.of(cfg.task_subnet)
        runtime = ContainerRuntime(cfg.data_dir / "node", cfg.oci_runtime, network=network)
        node = build_node(cfg)
        real_gpus = any(not g.fake for g in node.gpus)
        return LocalEngine(NodeAgent(node, runtime, NvmlHealth().check if real_gpus else None))
    nodes = str(cfg.data_dir / "nodes")
    config = RayEngineConfig(address, nodes, cfg.oci_runtime, task_network=cfg.task_network)
    return RayEngine(config)


def build_app(cfg: ServerConfig) -> FastAPI:
    controller, gpus, leadership = build_controller(cfg)
    takeover = Takeover(controller, lambda: build_engine(cfg), cfg.data_dir, cfg.storage_roots)
    leadership.elected = takeover
    if not leadership.try_lead():  # another server leads: this one follows, and waits
        log.info("following the leader (%s); the API serves meanwhile", _leader_line(leadership))

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        gpus.start()
        leadership.start()
        takeover.serve()
        yield
        takeover.stop()  # the controller first; the lease is renewed until it is released
        gpus.stop()
        controller.engine.close()
        leadership.stop()
        leadership.release()  # only now may a follower take over (at once)
        controller.store.close()

    app = create_app(controller)
    app.state.leadership = leadership
    app.state.gpu_readings = gpus
    app.state.metrics_token = metrics_token(cfg)
    app.state.metrics_open = cfg.metrics_open
    app.state.log_streams = LogStreams(cfg.log_follows_per_user)
    app.router.lifespan_context = lifespan
    return app


def _leader_line(leadership: Leadership) -> str:
    info = leadership.current()
    if info is None:
        return "none yet"
    return f"{info.holder} at {info.address}, term {info.term}"


def _role_line(leadership: Leadership | None) -> str:
    if leadership is None or leadership.leading:
        return "leader: runs the controller"
    return "follower: serves the API, takes over when the leader is gone (docs/ha.md)"


def describe(cfg: ServerConfig, ctl: Controller, leadership: Leadership | None = None) -> str:
    url = f"http://{cfg.host}:{cfg.port}"
    return "\n".join(
        [
            f"gpuyard is up at {url}  (API docs: {url}/docs)",
            f"  data dir : {cfg.data_dir}",
            f"  engine   : {cfg.engine}",
            f"  role     : {_role_line(leadership)}",
            *[f"  node     : {_node_line(node)}" for node in ctl.engine.nodes()],
            f"  runtime  : {getattr(ctl.engine, 'runtime_name', 'oci')}",
            "Log in and submit an example from another shell:",
            *_login_lines(cfg, url),
            "  .venv/bin/gpuyard submit examples/hello.yaml --wait",
            "  .venv/bin/gpuyard jobs",
        ]
    )


def _node_line(node: Node) -> str:
    gpus = ", ".join(f"{g.index}:{g.label}" for g in node.gpus) or "none"
    return (
        f"{node.name} ({node.address}): {node.cpu_milli / 1000:g} CPUs, {node.memory_mb} MB, "
        f"GPUs: {gpus}"
    )


def _login_lines(cfg: ServerConfig, url: str) -> list[str]:
    path = token_file(cfg.data_dir)
    if path.exists():
        return [f"  .venv/bin/gpuyard login --url {url} --token-file {path}"]
    return [
        f"  .venv/bin/gpuyard login --url {url} --token-file FILE  (a file holding your API token)"
    ]


def serve(cfg: ServerConfig) -> None:
    """Listen first, then build the platform (the engine adopts the running tasks) and serve:
    a task holding the API port stops the server before it adopts anything (`PortHeld`)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    # the controller's thread holds the GIL in stretches of this much at most, so a request
    # waits less behind a cycle (docs/benchmarks.md: with 10,000 queued, p99s halved)
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    sock = listen_socket(cfg.host, cfg.port)
    try:
        app = build_app(cfg)
        print(describe(cfg, app.state.controller, app.state.leadership), flush=True)
        config = uvicorn.Config(app, host=cfg.host, port=cfg.port, log_level="warning")
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
