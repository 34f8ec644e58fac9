"""`gpuyard up`: start the platform (API, controller; this machine or a Ray cluster as nodes)."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import Annotated

import typer

from gpuyard.api.services.logstreams import DEFAULT_FOLLOWS_PER_USER
from gpuyard.controller.lease import LEASE_TTL_S, DataDirInUse
from gpuyard.engine.ray import parse_engine
from gpuyard.engine.subnets import DEFAULT_NETWORK
from gpuyard.runtime.hostport import PortHeld
from gpuyard.scheduler import compiled
from gpuyard.server import ServerConfig, default_data_dir, serve

DEFAULT_DATA_DIR = default_data_dir()

up_app = typer.Typer(add_completion=False)


@up_app.command()
def up(
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to listen on")] = 8080,
    data_dir: Annotated[
        Path, typer.Option(help="where the database, logs and task state live")
    ] = DEFAULT_DATA_DIR,
    fake_gpus: Annotated[
        str | None, typer.Option(help="declare fake GPUs, e.g. 4xA100-80GB")
    ] = None,
    fake_gpus_if_none: Annotated[
        str | None, typer.Option(help="declare these fake GPUs only when NVML finds none")
    ] = None,
    node_name: Annotated[
        str | None, typer.Option(help="this node's name (default: hostname)")
    ] = None,
    oci_runtime: Annotated[
        str | None, typer.Option(help="crun or runc (default: crun if it works here)")
    ] = None,
    stop_grace: Annotated[
        float, typer.Option(help="seconds between SIGTERM and SIGKILL on cancel")
    ] = 10.0,
    pids_limit: Annotated[int, typer.Option(help="most processes and threads per task")] = 4096,
    db_url: Annotated[
        str | None, typer.Option(help="database URL (default: SQLite in the data dir)")
    ] = None,
    metrics_token_file: Annotated[
        Path | None,
        typer.Option(
            help="a file holding the token Prometheus must send to /metrics "
            "(default: $GPUYARD_METRICS_TOKEN_FILE, else DATA_DIR/metrics-token, made on "
            "first start; a platform admin's API token works too)"
        ),
    ] = None,
    metrics_open: Annotated[
        bool,
        typer.Option(
            "--metrics-open",
            help="serve /metrics to anyone, without job, task and user labels (summed by tenant)",
        ),
    ] = False,
    log_follows_per_user: Annotated[
        int,
        typer.Option(
            min=1, help="logs one user may follow (logs?follow=true) at once; beyond: 429"
        ),
    ] = DEFAULT_FOLLOWS_PER_USER,
    engine: Annotated[
        str,
        typer.Option(
            help="where the nodes come from: 'local' (this machine) or 'ray://HEAD:PORT' "
            "(a Ray cluster's GCS address; run gpuyard on one of its nodes)"
        ),
    ] = "local",
    task_ports: Annotated[
        str,
        typer.Option(
            help="the port range LO-HI reserved for tasks on every node (MASTER_PORT and "
            "each role's `ports`); keep it out of the ephemeral range and other services'"
        ),
    ] = "20000-29999",
    task_subnet: Annotated[
        str | None,
        typer.Option(
            envvar="GPUYARD_TASK_SUBNET",
            help="the IPv4 subnet this machine's tasks get their own addresses from (local "
            "engine; default 10.213.0.0/24): keep it free of the site's networks",
        ),
    ] = None,
    task_network: Annotated[
        str,
        typer.Option(
            envvar="GPUYARD_TASK_NETWORK",
            help="a Ray cluster's task network: each node routes a /24 of it to its tasks",
        ),
    ] = DEFAULT_NETWORK,
    lease_ttl: Annotated[
        float,
        typer.Option(
            min=1.0,
            help="several servers on one PostgreSQL database (docs/ha.md): the leader acts at "
            "most this many seconds after its last heartbeat; a follower takes over after it",
        ),
    ] = LEASE_TTL_S,
    storage_root: Annotated[
        list[str] | None,
        typer.Option(
            help="on first start, a dir the default tenant's jobs may use as dataDir "
            "or outputDir (repeatable; default: DATA_DIR/storage and /tmp)"
        ),
    ] = None,
) -> None:
    """Start the platform in the foreground: API, controller, this machine (or a Ray cluster)
    as the nodes."""
    if compiled():
        raise typer.BadParameter(
            "this is the replay build (make compiled: its model types are compiled, and "
            "the API's validation cannot read them); run the platform without "
            "build/compiled on PYTHONPATH",
            param_hint="PYTHONPATH",
        )
    try:
        parse_engine(engine)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--engine") from None
    ports = parse_port_range(task_ports)
    for value, hint in ((task_subnet, "--task-subnet"), (task_network, "--task-network")):
        try:
            ipaddress.IPv4Network(value or DEFAULT_NETWORK)
        except ValueError as e:
            raise typer.BadParameter(str(e), param_hint=hint) from None
    if metrics_open and metrics_token_file:
        raise typer.BadParameter(
            "an open /metrics takes no token file", param_hint="--metrics-open"
        )
    try:
        serve(
            ServerConfig(
                host=host,
                port=port,
                data_dir=data_dir.expanduser(),
                fake_gpus=fake_gpus,
                fake_gpus_if_none=fake_gpus_if_none,
                node_name=node_name,
                oci_runtime=oci_runtime,
                stop_grace_s=stop_grace,
                pids_limit=pids_limit,
                db_url=db_url,
                storage_roots=tuple(os.path.abspath(p) for p in storage_root or ()),
                metrics_token_file=metrics_token_file,
                metrics_open=metrics_open,
                log_follows_per_user=log_follows_per_user,
                engine=engine,
                task_ports=ports,
                task_subnet=task_subnet,
                task_network=task_network,
                lease_ttl_s=lease_ttl,
            )
        )
    except (PortHeld, DataDirInUse) as e:
        typer.echo(f"gpuyard up: {e}", err=True)
        raise typer.Exit(1) from None


def parse_port_range(text: str) -> tuple[int, int]:
    """`20000-29999` → (20000, 29999): 1024 < LO ≤ HI < 65536."""
    lo, sep, hi = text.partition("-")
    try:
        bounds = (int(lo), int(hi))
    except ValueError:
        bounds = (0, 0)
    if not sep or not 1024 < bounds[0] <= bounds[1] < 65536:
        raise typer.BadParameter(
            f"{text!r} is not LO-HI with 1024 < LO <= HI < 65536", param_hint="--task-ports"
        )
    return bounds
