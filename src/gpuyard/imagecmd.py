"""`gpuyard image ...`: the image store of this node, worked on directly (like `up`, no server).

The store is `<data dir>/node/images` (the node's state root is `<data dir>/node`), the one a
server started with the same `--data-dir` runs its tasks from; see docs/images.md.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

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


def _store(data_dir: Path) -> ImageStore:
    return ImageStore(data_dir.expanduser() / "node")


def _fail(e: ImageError) -> typer.Exit:
    typer.echo(f"error: {e}", err=True)
    return typer.Exit(1)


def _split(name: str) -> tuple[str, str]:
    repo, _, tag = name.rpartition(":")
    return (repo, tag) if "/" not in tag else (name, "")


def _human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f}{unit}" if unit == "B" else f"{value:.1f}{unit}"
        value /= 1024
    return f"{value:.1f}GB"


def _row(info: ImageInfo) -> str:
    repo, tag = _split(info.name)
    used = time.strftime("%Y-%m-%d %H:%M", time.localtime(info.last_used))
    return f"{repo:<32} {tag:<16} {info.digest[7:19]:<12} {_human(info.size):>9}  {used}"


@image_app.command("import")
def import_(
    file: Annotated[
        Path, typer.Argument(help="a rootfs tarball, an OCI archive or a docker-archive")
    ],
    name: Annotated[str, typer.Option(help="NAME:TAG to import it as")],
    fmt: Annotated[
        str, typer.Option("--format", help="auto, rootfs, oci-archive or docker-archive")
    ] = "auto",
    data_dir: DataDir = DEFAULT_DATA_DIR,
) -> None:
    """Import an image file into this node's store."""
    try:
        info = _store(data_dir).import_file(file, name, fmt)
    except ImageError as e:
        raise _fail(e) from e
    typer.echo(f"imported {info.name} {info.digest}")


@image_app.command("pull")
def pull(
    ref: Annotated[str, typer.Argument(help="NAME[:TAG] in a registry, like busybox:1.36")],
    data_dir: DataDir = DEFAULT_DATA_DIR,
) -> None:
    """Pull an image from its registry with skopeo (fails clearly when none is reachable)."""
    try:
        info = _store(data_dir).pull(ref)
    except ImageError as e:
        raise _fail(e) from e
    typer.echo(f"pulled {info.name} {info.digest}")


@image_app.command("ls")
def ls(data_dir: DataDir = DEFAULT_DATA_DIR) -> None:
    """The images on this node: name, tag, digest, size on disk, last used."""
    typer.echo(f"{'NAME':<32} {'TAG':<16} {'DIGEST':<12} {'SIZE':>9}  LAST USED")
    for info in _store(data_dir).list():
        typer.echo(_row(info))


@image_app.command("rm")
def rm(
    ref: Annotated[str, typer.Argument(help="NAME:TAG")],
    data_dir: DataDir = DEFAULT_DATA_DIR,
) -> None:
    """Remove an image (refused while a task on this node uses it)."""
    try:
        _store(data_dir).remove(ref)
    except ImageError as e:
        raise _fail(e) from e
    typer.echo(f"removed {ref}")


@image_app.command("gc")
def gc(
    budget_gb: Annotated[
        float | None, typer.Option(help="disk budget (default: GPUYARD_IMAGE_BUDGET_GB or 50)")
    ] = None,
    data_dir: DataDir = DEFAULT_DATA_DIR,
) -> None:
    """Remove least recently used images not in use until the store fits its budget."""
    try:
        removed = _store(data_dir).gc(budget_gb)
    except ImageError as e:
        raise _fail(e) from e
    typer.echo("\n".join(f"removed {n}" for n in removed) or "nothing to remove")
