"""`gpuyard image ...`: the image store of this node, worked on directly (like `up`, no server);
with `--node NAME` (repeatable) or `--all-nodes`, the stores of the cluster's nodes through the
server instead (`gpuyard.cli.images`, a platform admin's login).

The local store is `<data dir>/node/images` (the node's state root is `<data dir>/node`), the
one a server started with the same `--data-dir` runs its tasks from; see docs/images.md.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from gpuyard.cli import images as cluster
from gpuyard.cli.session import session_of
from gpuyard.runtime.errors import ImageError
from gpuyard.runtime.images import ImageInfo, ImageStore
from gpuyard.server import default_data_dir

image_app = typer.Typer(
    help="Images on this node: import, pull, list, remove.", no_args_is_help=True
)

DataDir = Annotated[
    Path, typer.Option(help="the server's data dir (images live in DATA_DIR/node/images)")
]
DEFAULT_DATA_DIR = default_data_dir()
Nodes = Annotated[
    list[str] | None,
    typer.Option("--node", metavar="NAME", help="on this node of the cluster, through the "
                 "server (repeatable)"),
]
AllNodes = Annotated[
    bool, typer.Option("--all-nodes", help="on every node of the cluster, through the server")
]


def _store(data_dir: Path) -> ImageStore:
    return ImageStore(data_dir.expanduser() / "node")


def _fail(e: ImageError) -> typer.Exit:
    typer.echo(f"error: {e}", err=True)
    return typer.Exit(1)


def _row(info: ImageInfo) -> str:
    repo, tag = cluster.split_name(info.name)
    used = time.strftime("%Y-%m-%d %H:%M", time.localtime(info.last_used))
    return f"{repo:<32} {tag:<16} {info.digest[7:19]:<12} {cluster.human(info.size):>9}  {used}"


@image_app.command("import")
def import_(
    ctx: typer.Context,
    file: Annotated[
        Path, typer.Argument(help="a rootfs tarball, an OCI archive or a docker-archive")
    ],
    name: Annotated[str, typer.Option(help="NAME:TAG to import it as")],
    fmt: Annotated[
        str, typer.Option("--format", help="auto, rootfs, oci-archive or docker-archive")
    ] = "auto",
    data_dir: DataDir = DEFAULT_DATA_DIR,
    node: Nodes = None,
    all_nodes: AllNodes = False,
) -> None:
    """Import an image file into this node's store (or the nodes', through the server)."""
    if node or all_nodes:
        session = session_of(ctx)
        cluster.check_choice(session, node, all_nodes)
        cluster.import_file(session, file, name, fmt, node, all_nodes)
        return
    try:
        info = _store(data_dir).import_file(file, name, fmt)
    except ImageError as e:
        raise _fail(e) from e
    typer.echo(f"imported {info.name} {info.digest}")


@image_app.command("pull")
def pull(
    ctx: typer.Context,
    ref: Annotated[str, typer.Argument(help="NAME[:TAG] in a registry, like busybox:1.36")],
    data_dir: DataDir = DEFAULT_DATA_DIR,
    node: Nodes = None,
    all_nodes: AllNodes = False,
    wait: Annotated[bool, typer.Option(help="wait until every node has it (or failed)")] = True,
    timeout: Annotated[float, typer.Option(help="seconds to wait at most")] = 900.0,
) -> None:
    """Pull an image from its registry with skopeo (fails clearly when none is reachable)."""
    if node or all_nodes:
        session = session_of(ctx)
        cluster.check_choice(session, node, all_nodes)
        cluster.pull(session, ref, node, all_nodes, wait, timeout)
        return
    try:
        info = _store(data_dir).pull(ref)
    except ImageError as e:
        raise _fail(e) from e
    typer.echo(f"pulled {info.name} {info.digest}")


@image_app.command("ls")
def ls(
    ctx: typer.Context,
    data_dir: DataDir = DEFAULT_DATA_DIR,
    node: Nodes = None,
    all_nodes: AllNodes = False,
    json_out: Annotated[bool, typer.Option("--json", help="the API's JSON (with --node)")] = False,
) -> None:
    """The images on this node: name, tag, digest, size on disk, last used; with --node or
    --all-nodes, the nodes that hold each."""
    if node or all_nodes:
        session = session_of(ctx)
        cluster.check_choice(session, node, all_nodes)
        cluster.list_images(session, node, json_out)
        return
    typer.echo(f"{'NAME':<32} {'TAG':<16} {'DIGEST':<12} {'SIZE':>9}  LAST USED")
    for info in _store(data_dir).list():
        typer.echo(_row(info))


@image_app.command("rm")
def rm(
    ctx: typer.Context,
    ref: Annotated[str, typer.Argument(help="NAME:TAG")],
    data_dir: DataDir = DEFAULT_DATA_DIR,
    node: Nodes = None,
    all_nodes: AllNodes = False,
) -> None:
    """Remove an image (refused while a task on this node uses it)."""
    if node or all_nodes:
        session = session_of(ctx)
        cluster.check_choice(session, node, all_nodes)
        cluster.remove(session, ref, node, all_nodes)
        return
    try:
        _store(data_dir).remove(ref)
    except ImageError as e:
        raise _fail(e) from e
    typer.echo(f"removed {ref}")


@image_app.command("gc")
def gc(
    ctx: typer.Context,
    budget_gb: Annotated[
        float | None, typer.Option(help="disk budget (default: GPUYARD_IMAGE_BUDGET_GB or 50)")
    ] = None,
    data_dir: DataDir = DEFAULT_DATA_DIR,
    node: Nodes = None,
    all_nodes: AllNodes = False,
) -> None:
    """Remove least recently used images not in use until the store fits its budget (each
    node's own, with --node or --all-nodes)."""
    if node or all_nodes:
        session = session_of(ctx)
        cluster.check_choice(session, node, all_nodes)
        cluster.collect(session, budget_gb, node, all_nodes)
        return
    try:
        removed = _store(data_dir).gc(budget_gb)
    except ImageError as e:
        raise _fail(e) from e
    typer.echo("\n".join(f"removed {n}" for n in removed) or "nothing to remove")
