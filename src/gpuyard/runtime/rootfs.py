"""Where a container's root filesystem comes from (`RootfsSource`), and the host-root source.

`HostRootfs` is the "no image" mode: the task sees the host's root filesystem read-only, as
under Slurm. OCI runtimes cannot use `/` itself as the root (pivot_root fails), so the root is a
small skeleton dir (`<state_root>/hostroot`) that mirrors `/`'s top-level symlinks (bin ->
usr/bin, ...) and holds an empty dir per top-level host dir; each of those dirs is bind-mounted
over it recursively read-only (`rro`: submounts are read-only too, kernel 5.12+). /proc, /sys,
/dev, /tmp and /run are the container's own. The state root is hidden under an empty read-only
tmpfs, so a task sees neither its own nor other tasks' state (bundles hold their env).

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

HOST_SKIP = frozenset({"proc", "sys", "dev", "tmp", "run", "lost+found", "old_root"})
OWN_DIRS = ("proc", "sys", "dev", "tmp", "run", "data", "output", "workspace")


@dataclass(frozen=True, slots=True)
class Rootfs:
    """A prepared root: the dir for `root.path`, whether it is read-only, mounts to add, and
    the image's run defaults (None: the host root, no image)."""

    path: Path
    readonly: bool
    mounts: tuple[Mount, ...] = ()
    image: ImageConfig | None = None


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


class HostRootfs:
    """The host's `/`, read-only, built as a skeleton dir plus read-only binds."""

    def __init__(self, skeleton: Path, hidden: tuple[Path, ...] = (), host: Path = Path("/")):
        self.skeleton = skeleton
        self.hidden = hidden
        self.host = host

    def _host_dirs(self) -> list[str]:
        """Mirror the host's top-level symlinks; the names of top-level dirs to bind."""
        dirs = []
        for entry in sorted(os.scandir(self.host), key=lambda e: e.name):
            if entry.name.startswith("."):
                continue
            if entry.is_symlink():
                _mirror_symlink(self.skeleton / entry.name, os.readlink(entry.path))
            elif entry.is_dir() and entry.name not in HOST_SKIP:
                dirs.append(entry.name)
        return dirs

    def _hide(self, bound: list[str]) -> list[Mount]:
        """Empty read-only tmpfs over each hidden path that a bind would expose."""
        mounts = []
        for path in self.hidden:
            try:
                inside = path.resolve().relative_to(self.host.resolve())
            except ValueError:
                continue
            if inside.parts and inside.parts[0] in bound:
                mounts.append(tmpfs(f"/{inside}", "ro", "noexec", "size=4k", "mode=0555"))
        return mounts

    def prepare(self) -> Rootfs:
        self.skeleton.mkdir(parents=True, exist_ok=True)
        dirs = self._host_dirs()
        for name in (*dirs, *OWN_DIRS):
            if not (self.skeleton / name).is_symlink():
                (self.skeleton / name).mkdir(exist_ok=True)
        mounts = [bind(str(self.host / name), f"/{name}", readonly=True) for name in dirs]
        mounts.append(tmpfs("/tmp", "mode=1777"))
        mounts.append(tmpfs("/run", "mode=0755"))
        mounts.extend(self._hide(dirs))
        return Rootfs(self.skeleton, readonly=True, mounts=tuple(mounts))
