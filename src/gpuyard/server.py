"""`gpuyard up`: assemble the embedded platform (store, node agent, controller, API), serve it."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import uvicorn
from fastapi import FastAPI

from gpuyard.api import create_app
from gpuyard.api.services.bootstrap import bootstrap, token_file
from gpuyard.controller import Controller
from gpuyard.engine import LocalEngine, NodeAgent
from gpuyard.model import Node, SystemClock
from gpuyard.runtime.executor import ContainerRuntime
from gpuyard.runtime.gpustats import NvmlSampler
from gpuyard.runtime.node import local_node
from gpuyard.store import open_store

log = logging.getLogger("gpuyard")

# a file holding the token Prometheus must send to /metrics (unset: /metrics is open)
METRICS_TOKEN_FILE_ENV = "GPUYARD_METRICS_TOKEN_FILE"


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


def build_node(cfg: ServerConfig) -> Node:
    node = local_node(cfg.node_name, cfg.fake_gpus)
    if not node.gpus and cfg.fake_gpus_if_none and not cfg.fake_gpus:
        node = local_node(cfg.node_name, cfg.fake_gpus_if_none)
    return node


def metrics_token(cfg: ServerConfig) -> str | None:
    """The scrape token of /metrics, read from its file; None leaves /metrics open."""
    path = cfg.metrics_token_file or os.environ.get(METRICS_TOKEN_FILE_ENV)
    if not path:
        return None
    token = Path(path).read_text().strip()
    if not token:
        raise ValueError(f"the metrics token file {path} is empty")
    return token


def build_controller(cfg: ServerConfig, gpus: NvmlSampler | None = None) -> Controller:
    cfg.data_dir.mkdir(parents=True, exist_ok=True)
    clock = SystemClock()
    store = open_store(cfg.data_dir, cfg.db_url, clock)
    runtime = ContainerRuntime(cfg.data_dir / "node", cfg.oci_runtime)
    engine = LocalEngine(NodeAgent(build_node(cfg), runtime))
    return Controller(
        store,
        engine,
        clock,
        interval_s=cfg.cycle_interval_s,
        stop_grace_s=cfg.stop_grace_s,
        pids_limit=cfg.pids_limit,
        gpu_utilization=gpus.utilization if gpus else None,
    )


def build_app(cfg: ServerConfig) -> FastAPI:
    gpus = NvmlSampler()
    controller = build_controller(cfg, gpus)
    created = bootstrap(
        controller.store, controller.engine.nodes(), cfg.data_dir, cfg.storage_roots
    )
    if created:
        log.info(
            "first start: made the platform admin 'admin' and the tenant 'default'; "
            "the admin's token is in %s",
            created,
        )

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        controller.start()
        yield
        controller.stop()
        controller.engine.close()
        controller.store.close()
        gpus.close()

    app = create_app(controller)
    app.state.gpu_sampler = gpus
    app.state.metrics_token = metrics_token(cfg)
    app.router.lifespan_context = lifespan
    return app


def describe(cfg: ServerConfig, ctl: Controller) -> str:
    node = ctl.engine.nodes()[0]
    gpus = ", ".join(f"{g.index}:{g.label}" for g in node.gpus) or "none"
    url = f"http://{cfg.host}:{cfg.port}"
    return "\n".join(
        [
            f"gpuyard is up at {url}  (API docs: {url}/docs)",
            f"  data dir : {cfg.data_dir}",
            f"  node     : {node.name}: {node.cpu_milli / 1000:g} CPUs, {node.memory_mb} MB, "
            f"GPUs: {gpus}",
            f"  runtime  : {getattr(ctl.engine, 'runtime_name', 'oci')}",
            "Log in and submit an example from another shell:",
            *_login_lines(cfg, url),
            "  .venv/bin/gpuyard submit examples/hello.yaml --wait",
            "  .venv/bin/gpuyard jobs",
        ]
    )


def _login_lines(cfg: ServerConfig, url: str) -> list[str]:
    path = token_file(cfg.data_dir)
    if path.exists():
        return [f"  .venv/bin/gpuyard login --url {url} --token-file {path}"]
    return [
        f"  .venv/bin/gpuyard login --url {url} --token-file FILE  (a file holding your API token)"
    ]


def serve(cfg: ServerConfig) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    app = build_app(cfg)
    print(describe(cfg, app.state.controller), flush=True)
    uvicorn.run(app, host=cfg.host, port=cfg.port, log_level="warning")
