"""Where a container's root filesystem comes from (`RootfsSource`), and the host-root source.

`HostRootfs` is the "no image" mode: the task sees the host's *system* dirs read-only (`/usr`,
`/etc`, `/opt`, `/bin`, `/lib*`, `/sbin`: what programs need), not the host's filesystem: no
`/home`, `/root`, `/srv`, `/mnt`, `/var`, no data dir and no tenant's storage roots. An admin adds
more host paths per node (`GPUYARD_HOST_PATHS`, `gpuyard up --host-path`), e.g. a shared
software tree. OCI runtimes cannot use `/` itself as the root (pivot_root fails), so the root
is a small skeleton dir (`<state_root>/hostroot`) that mirrors `/`'s top-level symlinks (bin ->
usr/bin, ...) and holds an empty dir per shown host dir; each of those is bind-mounted over it
recursively read-only (`rro`: submounts are read-only too, kernel 5.12+). /proc, /sys, /dev,
/tmp and /run are the container's own. Hidden paths (the state root) that a shown dir holds
are covered by an empty read-only tmpfs, and the host's password hashes (`/etc/shadow`,
`/etc/gshadow`) are masked.

Images are the other source: `overlay.overlay_root` mounts a copy-on-write overlay over an
image unpacked by the node's `images.ImageStore`, and returns a writable `Rootfs` carrying the
image's run defaults (`image`).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from gpuyard.runtime.imageconfig import ImageConfig

Mount = dict[str, Any]

HOST_VIEW = frozenset({"bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc", "opt"})
HOST_PATHS_ENV = "GPUYARD_HOST_PATHS"  # more host paths to show, ':'-separated
MASKED_FILES = ("/etc/shadow", "/etc/gshadow")
OWN_DIRS = ("proc", "sys", "dev", "tmp", "run", "data", "output", "workspace", "mnt")


@dataclass(frozen=True, slots=True)
class Rootfs:
    """A prepared root: the dir for `root.path`, whether it is read-only, mounts to add, and
    the image's run defaults (None: the host root, no image)."""

    path: Path
    readonly: bool
    mounts: tuple[Mount, ...] = ()
    image: ImageConfig | None = None
    masked: tuple[str, ...] = ()  # paths covered for the task (OCI maskedPaths)


class RootfsSource(Protocol):
    def prepare(self) -> Rootfs:
        """Make the root ready (idempotent, safe to call from several processes at once)."""
        ...


def bind(source: str, destination: str, readonly: bool) -> Mount:
    options = ["rbind", "rro" if readonly else "rw", "nosuid", "nodev"]
    return {"type": "bind", "source": source, "destination": destination, "options": options}


def tmpfs(destination: str, *options: str) -> Mount:
    return {
        "type": "tmpfs",
        "source": "tmpfs",
        "destination": destination,
        "options": ["nosuid", "nodev", *options],
    }


def _mirror_symlink(link: Path, target: str) -> None:
    with contextlib.suppress(FileExistsError):
        os.symlink(target, link)


def host_paths_from_env() -> tuple[str, ...]:
    """The extra host paths this node's admin set in `GPUYARD_HOST_PATHS`."""
    return tuple(p for p in os.environ.get(HOST_PATHS_ENV, "").split(":") if p)


class HostRootfs:
    """The host's system dirs (and `extra` paths), read-only: a skeleton dir plus binds."""

    def __init__(
        self,
        skeleton: Path,
        hidden: tuple[Path, ...] = (),
        host: Path = Path("/"),
        extra: tuple[str, ...] = (),
    ):
        self.skeleton = skeleton
        self.hidden = hidden
        self.host = host
        self.extra = tuple(
            p for p in (os.path.normpath(e) for e in extra) if p.startswith("/") and p != "/"
        )

    def _host_dirs(self) -> list[str]:
        """Mirror the host's top-level symlinks; the names of top-level dirs to bind."""
        dirs = []
        for entry in sorted(os.scandir(self.host), key=lambda e: e.name):
            if entry.name.startswith("."):
                continue
            if entry.is_symlink():
                _mirror_symlink(self.skeleton / entry.name, os.readlink(entry.path))
            elif entry.is_dir() and entry.name in HOST_VIEW:
                dirs.append(entry.name)
        return dirs

    def _extra_mounts(self, dirs: list[str]) -> list[Mount]:
        """Binds of the extra host paths that exist and are not shown already."""
        mounts = []
        for path in self.extra:
            rel = path.lstrip("/")
            source = self.host / rel
            if rel.split("/")[0] in dirs or not source.exists() or source.is_symlink():
                continue
            (self.skeleton / rel).mkdir(parents=True, exist_ok=True)
            mounts.append(bind(str(source), path, readonly=True))
        return mounts

    def _hide(self, bound: list[str]) -> list[Mount]:
        """Empty read-only tmpfs over each hidden path that a bind would expose."""
        mounts = []
        for path in self.hidden:
            try:
                inside = path.resolve().relative_to(self.host.resolve())
            except ValueError:
                continue
            if inside.parts and (inside.parts[0] in bound or self._extra_holds(inside)):
                mounts.append(tmpfs(f"/{inside}", "ro", "noexec", "size=4k", "mode=0555"))
        return mounts

    def _extra_holds(self, inside: Path) -> bool:
        return any(Path(e.lstrip("/")) in (inside, *inside.parents) for e in self.extra)

    def prepare(self) -> Rootfs:
        self.skeleton.mkdir(parents=True, exist_ok=True)
        dirs = self._host_dirs()
        for name in (*dirs, *OWN_DIRS):
            if not (self.skeleton / name).is_symlink():
                (self.skeleton / name).mkdir(exist_ok=True)
        mounts = [bind(str(self.host / name), f"/{name}", readonly=True) for name in dirs]
        mounts.extend(self._extra_mounts(dirs))
        mounts.append(tmpfs("/tmp", "mode=1777"))
        mounts.append(tmpfs("/run", "mode=0755"))
        mounts.extend(self._hide(dirs))
        masked = tuple(m for m in MASKED_FILES if (self.host / m.lstrip("/")).exists())
        return Rootfs(self.skeleton, readonly=True, mounts=tuple(mounts), masked=masked)
