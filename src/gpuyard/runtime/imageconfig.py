"""An image's run defaults (OCI config: Entrypoint, Cmd, Env, WorkingDir, User), as Docker
applies them, and lookups inside an unpacked root (a symlink-safe path walk, /etc/passwd).

Paths inside a root are resolved by hand, symlink by symlink, with absolute targets taken
relative to the root, so an image's symlink never leads to a host file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from gpuyard.runtime.errors import ImageError

MAX_LINKS = 40
IGNORED_IMAGE_ENV = frozenset({"NVIDIA_VISIBLE_DEVICES"})  # the platform decides the GPUs


@dataclass(frozen=True, slots=True)
class ImageConfig:
    """The defaults of one image, with its user resolved against the image's /etc/passwd."""

    ref: str
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    workdir: str = ""
    user: tuple[int, int] | None = None  # None: the image names no user (root)
    has_shell: bool = False  # /bin/sh exists in the image


def parse_env(entries: list[str] | None) -> tuple[tuple[str, str], ...]:
    """`NAME=value` entries, less the ones the platform owns."""
    out = []
    for entry in entries or []:
        name, sep, value = entry.partition("=")
        if sep and name and name not in IGNORED_IMAGE_ENV:
            out.append((name, value))
    return tuple(out)


def load_config(ref: str, raw: dict[str, Any], root: Path) -> ImageConfig:
    """The ImageConfig of `raw` (an OCI image config's `config`), unpacked at `root`."""
    user = str(raw.get("User") or "")
    return ImageConfig(
        ref=ref,
        entrypoint=tuple(raw.get("Entrypoint") or ()),
        cmd=tuple(raw.get("Cmd") or ()),
        env=parse_env(raw.get("Env")),
        workdir=str(raw.get("WorkingDir") or ""),
        user=resolve_user(ref, root, user) if user else None,
        has_shell=resolve_in_root(root, "/bin/sh") is not None,
    )


def process_args(config: ImageConfig, command: str) -> list[str]:
    """The job's command through the image's /bin/sh; without a command, Entrypoint + Cmd."""
    if command.strip():
        if not config.has_shell:
            raise ImageError(
                f"image {config.ref!r} has no /bin/sh to run the job's command with"
            )
        return ["/bin/sh", "-c", command]
    args = [*config.entrypoint, *config.cmd]
    if not args:
        raise ImageError(f"the job has no command and image {config.ref!r} no Entrypoint/Cmd")
    return args


def resolve_in_root(root: Path, path: str) -> Path | None:
    """The host path of `path` inside `root`, following symlinks within it; None if absent."""
    parts = list(PurePosixPath(path).parts[1:])
    current, links = root, 0
    while parts:
        part = parts.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            current = current.parent if current != root else root
            continue
        candidate = current / part
        if candidate.is_symlink():
            links += 1
            if links > MAX_LINKS:
                return None
            target = PurePosixPath(os.readlink(candidate))
            parts = [*target.parts[1:], *parts] if target.is_absolute() else [*target.parts,
                                                                               *parts]
            current = root if target.is_absolute() else current
            continue
        if not candidate.exists():
            return None
        current = candidate
    return current


def _lookup(root: Path, file: str, name: str) -> tuple[int, int] | None:
    """(id, primary gid or -1) of `name` (or numeric id) in the image's passwd/group file."""
    path = resolve_in_root(root, file)
    if path is None or not path.is_file():
        return None
    for line in path.read_text(errors="replace").splitlines():
        fields = line.split(":")
        if len(fields) >= 3 and (fields[0] == name or fields[2] == name):
            gid = int(fields[3]) if len(fields) > 3 and fields[3].isdigit() else -1
            return (int(fields[2]), gid) if fields[2].isdigit() else None
    return None


def resolve_user(ref: str, root: Path, user: str) -> tuple[int, int]:
    """`User` (`name`, `uid`, `name:group`, `uid:gid`) as numbers, Docker's way."""
    name, _, group = user.partition(":")
    found = _lookup(root, "/etc/passwd", name)
    if found is None and not name.isdigit():
        raise ImageError(f"image {ref!r}: user {name!r} is not in its /etc/passwd")
    uid = found[0] if found else int(name)
    gid = found[1] if found and found[1] >= 0 else 0
    if group:
        g = _lookup(root, "/etc/group", group)
        if g is None and not group.isdigit():
            raise ImageError(f"image {ref!r}: group {group!r} is not in its /etc/group")
        gid = g[0] if g else int(group)
    return uid, gid
