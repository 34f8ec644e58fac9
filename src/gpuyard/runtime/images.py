"""The image store of one node: `<state_root>/images/`, see docs/images.md.

    oci/                one OCI image layout (skopeo/umoci); each name is a ref in it
    unpacked/<hex>/     `umoci unpack` of one manifest digest: rootfs/ (the shared, never
                        written lower dir of every task on that image) + image.json (its config)
    index.json          {"images": {NAME:TAG: {digest, ref, source, importedAt, lastUsed,
                         blobBytes, access, sourceDigest}}, "sizes": {digest: unpacked bytes}}
    locks/              flock files: `index` (short), `layout` (shared to unpack, exclusive to
                        write), `<hex>` (one unpack per digest, even across processes)
    tmp/                unpacks in progress; `pull-*/`: a pull's own layout until it is merged

An image is unpacked once, on first use; every later task mounts an overlay over it. A task
uses its image while its task dir exists (`task.json` names the digest); such an image is never
removed, by `remove` or by the LRU garbage collection that keeps the store within its budget.

Each image says how it came (`access`: public, admin or private): a task may use a private one,
pulled with some task's registry login, only once the registry has let the task's own login
read it (imageaccess.py: `task_needs` says `verify`, `resolve` asks the registry).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuyard.model.registries import RegistryLogin, image_registry
from gpuyard.runtime import imagetools as tools
from gpuyard.runtime.errors import ImageError
from gpuyard.runtime.imageaccess import (
    ADMIN,
    PRIVATE,
    PUBLIC,
    START_MARGIN_S,
    VerifiedLogins,
    access_of,
    pull_access,
    redacted,
    refusal,
    registry_digest,
)
from gpuyard.runtime.imageconfig import ImageConfig, load_config
from gpuyard.runtime.registryauth import auth_file
from gpuyard.runtime.taskdir import read_json, write_json

GB = 1 << 30
DEFAULT_BUDGET_GB = 50.0
RECENT_USE_S = 120.0  # an image resolved this recently is in use (its task dir is being made)
STALE_PULL_S = 86400.0  # a pull's staging layout this old was left by a crash
WAIT_MARKER = "pulling.json"  # in a task dir: the task waits for this image (pullwait.py)
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,254}")


def normalize(ref: str) -> str:
    """`NAME:TAG` (`:latest` added when the reference has no tag or digest)."""
    ref = ref.strip()
    if not NAME_RE.fullmatch(ref):
        raise ImageError(f"bad image reference {ref!r}: expected NAME[:TAG], like busybox:1.36")
    last = ref.rsplit("/", 1)[-1]
    return ref if ":" in last or "@" in last else f"{ref}:latest"


@dataclass(frozen=True, slots=True)
class ImageInfo:
    name: str  # NAME:TAG
    digest: str
    size: int  # bytes on disk: blobs, plus the unpacked root once unpacked
    imported_at: float
    last_used: float
    source: str
    access: str = PUBLIC  # public, admin or private (imageaccess.py)


@dataclass(frozen=True, slots=True)
class ResolvedImage:
    name: str
    digest: str
    lower: Path  # the unpacked root, read-only for tasks (overlay lower dir)
    config: ImageConfig


def _tree_size(path: Path) -> int:
    total = 0
    for dirpath, dirnames, filenames in os.walk(path):
        for name in (*dirnames, *filenames):
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
    return total


class ImageStore:
    """Images of this node: import, pull, resolve for a task (unpack once), list, remove, GC."""

    def __init__(
        self,
        state_root: Path,
        budget_gb: float | None = None,
        pull: bool | None = None,
        insecure_registries: tuple[str, ...] | None = None,  # None: $GPUYARD_INSECURE_REGISTRIES
    ) -> None:
        self.root = Path(state_root) / "images"
        self.tasks_dir = Path(state_root) / "tasks"
        self.layout = self.root / "oci"
        self.unpacked_dir = self.root / "unpacked"
        self.index_file = self.root / "index.json"
        self.locks = self.root / "locks"
        env_budget = os.environ.get("GPUYARD_IMAGE_BUDGET_GB")
        self.budget = int(GB * (budget_gb or float(env_budget or DEFAULT_BUDGET_GB)))
        self.pull_missing = (
            pull if pull is not None else os.environ.get("GPUYARD_IMAGE_PULL", "missing") != "never"
        )
        if insecure_registries is None:
            listed = os.environ.get("GPUYARD_INSECURE_REGISTRIES", "").split(",")
            insecure_registries = tuple(h.strip() for h in listed if h.strip())
        self.insecure_registries = frozenset(insecure_registries)
        self.recent_use_s = RECENT_USE_S
        self.verified = VerifiedLogins()  # logins the registry let read a private image lately
        self._configs: dict[tuple[str, Path], ImageConfig] = {}
        for d in (self.unpacked_dir, self.locks, self.root / "tmp"):
            d.mkdir(parents=True, exist_ok=True)
        _sweep_stale_pulls(self.root / "tmp")

    # --- locks and the index ----------------------------------------------------------------

    @contextlib.contextmanager
    def _lock(self, name: str, shared: bool = False, block: bool = True) -> Iterator[bool]:
        """flock `locks/<name>`; yields False when `block` is off and another holds it."""
        fd = os.open(self.locks / name, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            mode = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | (0 if block else fcntl.LOCK_NB)
            try:
                fcntl.flock(fd, mode)
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(fd)

    def _read_index(self) -> dict[str, Any]:
        index = read_json(self.index_file)
        if not isinstance(index, dict):
            index = {}
        index.setdefault("images", {})
        index.setdefault("sizes", {})
        return index

    @contextlib.contextmanager
    def _index(self) -> Iterator[dict[str, Any]]:
        """The index, read and written back under the index lock."""
        with self._lock("index"):
            index = self._read_index()
            yield index
            write_json(self.index_file, index)

    # --- adding images ----------------------------------------------------------------------

    def import_file(self, path: Path, name: str, fmt: str = "auto") -> ImageInfo:
        """Import a rootfs tarball, an OCI archive or a docker-archive as `name`."""
        name = normalize(name)
        path = Path(path).resolve()
        if not path.is_file():
            raise ImageError(f"{path} is not a file")
        kind = tools.detect_format(path) if fmt == "auto" else fmt
        if kind not in tools.FORMATS[1:]:
            raise ImageError(f"unknown format {fmt!r}: expected one of {', '.join(tools.FORMATS)}")
        ref = _ref(name)
        with self._lock("layout"):
            tools.init_layout(self.layout)
            try:
                if kind == "rootfs":
                    tools.import_rootfs_tar(path, self.layout, ref)
                else:
                    tools.skopeo_copy(f"{kind}:{path}", f"oci:{self.layout}:{ref}")
            except ImageError as e:
                raise ImageError(f"cannot import {path} as {kind}: {e}") from e
            info = self._record(name, ref, f"{kind}:{path}", ADMIN)
        self.gc()
        return info

    def pull(
        self,
        ref: str,
        timeout_s: float = tools.TOOL_TIMEOUT_S,
        login: RegistryLogin | None = None,
        node_credentials: bool = True,
    ) -> ImageInfo:
        """`skopeo copy docker://REF`; ImageError with skopeo's cause when no registry answers.

        With `login`, or without `node_credentials` (a task's pull), skopeo reads that login
        alone from a private auth file (registryauth.py), never the node's own credentials.
        The image is then private (with a login), public (without), or admin (the node's
        admin with its own credentials): imageaccess.py.
        The copy from the registry goes to a layout of its own under `tmp/`, without any lock
        (a slow or hung registry holds up no other pull, import or unpack); only the merge into
        the store's layout (hard links and a local copy of the manifest) takes its lock.
        """
        name = normalize(ref)
        staging = self.root / "tmp" / f"pull-{uuid.uuid4().hex[:12]}"
        try:
            tools.init_layout(staging)
            source_digest = self._copy_in(name, staging, timeout_s, login, node_credentials)
            with self._lock("layout"):
                tools.init_layout(self.layout)
                tools.merge_layout(staging, self.layout, _ref(name))
                info = self._record(name, _ref(name), f"docker://{name}",
                                    pull_access(login, node_credentials), source_digest)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        self.verified.record(info.digest, login)  # the pull was the registry's yes
        self.gc()
        return info

    def _copy_in(self, name: str, staging: Path, timeout_s: float, login: RegistryLogin | None,
                 node_credentials: bool) -> str | None:
        """skopeo copy from the registry into `staging`; its error never holds the password.
        With a login, the registry's digest of the manifest is read first and returned (what
        a later check of another login compares: imageaccess.py); None without one."""
        own = login is not None or not node_credentials
        tls = self._tls_verify(name)
        with auth_file(login, self.root / "tmp") if own else contextlib.nullcontext() as path:
            try:
                digest = None if login is None else tools.skopeo_manifest_digest(
                    f"docker://{name}", timeout_s, tls, path)
                tools.skopeo_copy(f"docker://{name}", f"oci:{staging}:{_ref(name)}", timeout_s,
                                  tls_verify=tls, authfile=path)
            except ImageError as e:
                text = redacted(str(e), login)
                raise ImageError(f"cannot pull {name} from its registry: {text}") from e
        return digest

    def _tls_verify(self, name: str) -> bool:
        return image_registry(name) not in self.insecure_registries

    def _record(self, name: str, ref: str, source: str, access: str,
                source_digest: str | None = None) -> ImageInfo:
        digest = tools.manifest_digest(self.layout, ref)
        now = time.time()
        with self._index() as index:
            index["images"][name] = {
                "digest": digest,
                "ref": ref,
                "source": source,
                "importedAt": now,
                "lastUsed": now,
                "blobBytes": tools.compressed_size(self.layout, digest),
                "access": access,
                **({"sourceDigest": source_digest} if source_digest else {}),
            }
            return self._info(name, index)

    # --- using images -----------------------------------------------------------------------

    def fetch_needed(self, ref: str) -> str | None:
        """None when `ref`'s files are here, ready to mount; else what must come first, `pull`
        or `unpack` (`resolve` does it: slow, so not on a start's path). ImageError if it
        never can: a bad reference, or an image missing while pulling is off. Whether a task
        may use them is `task_needs`."""
        name = normalize(ref)
        return self._needed(ref, name, self._read_index()["images"].get(name))

    def task_needs(self, ref: str, login: RegistryLogin | None = None) -> str | None:
        """`fetch_needed` for a task with `login`: `verify` too when the image is private here
        and the registry did not let this login read it lately (imageaccess.py)."""
        name = normalize(ref)
        entry = self._read_index()["images"].get(name)
        needed = self._needed(ref, name, entry)
        if entry is not None and not self._may_use(entry, login, START_MARGIN_S):
            return "verify"
        return needed

    def _needed(self, ref: str, name: str, entry: dict[str, Any] | None) -> str | None:
        if entry is None:
            if not self.pull_missing:
                self._fetch_missing(ref, name)  # raises: pulling is off
            return "pull"
        unpacked = self.unpacked_dir / entry["digest"].partition(":")[2] / "image.json"
        return None if unpacked.exists() else "unpack"

    def _may_use(self, entry: dict[str, Any], login: RegistryLogin | None,
                 margin_s: float = 0.0) -> bool:
        """Whether a task with `login` may use the stored image without asking its registry."""
        private = access_of(entry) == PRIVATE
        return not private or self.verified.fresh(entry["digest"], login, margin_s)

    def resolve(self, ref: str, pull_timeout_s: float = tools.TOOL_TIMEOUT_S,
                login: RegistryLogin | None = None) -> ResolvedImage:
        """The image for a task: pulled if missing (unless pulling is off) with the task's
        `login` and no other credentials, its `login` checked at the registry if the image is
        private here (`verify`), unpacked once. ImageError when the registry refuses it."""
        name = normalize(ref)
        entry = self._read_index()["images"].get(name)
        if entry is None:
            entry = self._fetch_missing(ref, name, pull_timeout_s, login)
        elif not self._may_use(entry, login):
            entry = self._verify(name, entry, pull_timeout_s, login)
        bundle = self._unpacked(entry["digest"], entry["ref"])
        if time.time() - entry["lastUsed"] > self.recent_use_s / 4:  # LRU needs no finer clock
            with self._index() as index:
                if name in index["images"]:
                    index["images"][name]["lastUsed"] = time.time()
        return ResolvedImage(name, entry["digest"], bundle / "rootfs", self._config(name, bundle))

    def _config(self, name: str, bundle: Path) -> ImageConfig:
        """The image's config (an unpacked bundle never changes: read once per name and dir)."""
        key = (name, bundle)
        if key not in self._configs:
            raw = read_json(bundle / "image.json")
            self._configs[key] = load_config(name, raw if isinstance(raw, dict) else {},
                                             bundle / "rootfs")
        return self._configs[key]

    def _verify(self, name: str, entry: dict[str, Any], timeout_s: float,
                login: RegistryLogin | None) -> dict[str, Any]:
        """Let a task with `login` use the private image `entry` once its registry let that
        login read the same manifest (anonymous access: the image is public after all); the
        tag moved on: pulled anew with `login`. ImageError (`refusal`) otherwise."""
        try:
            digest = registry_digest(name, login, self.root / "tmp", timeout_s,
                                     self._tls_verify(name))
        except ImageError as e:
            raise refusal(name, login, e) from e
        if digest != entry.get("sourceDigest"):
            return self._fetch_missing(name, name, timeout_s, login, "changed at its registry")
        if login is not None:
            self.verified.record(entry["digest"], login)
            return entry
        with self._index() as index:
            now = index["images"].get(name)
            if now is not None and now["digest"] == entry["digest"]:
                now["access"] = PUBLIC
        return {**entry, "access": PUBLIC}

    def _fetch_missing(
        self, ref: str, name: str, timeout_s: float = tools.TOOL_TIMEOUT_S,
        login: RegistryLogin | None = None, why: str = "is not on this node",
    ) -> dict[str, Any]:
        if not self.pull_missing:
            raise ImageError(
                f"image {ref!r} {why} (pulling is off: import it with "
                "`gpuyard image import FILE --name NAME:TAG`)"
            )
        try:
            self.pull(name, timeout_s, login, node_credentials=False)
        except ImageError as e:
            raise ImageError(f"image {ref!r} {why} and could not be pulled: {e}") from e
        return self._read_index()["images"][name]

    def _unpacked(self, digest: str, ref: str) -> Path:
        """The unpacked bundle of `digest`, unpacking it first if no one has (once, locked)."""
        hexdigest = digest.partition(":")[2]
        bundle = self.unpacked_dir / hexdigest
        if (bundle / "image.json").exists():
            return bundle
        with self._lock(hexdigest):
            if (bundle / "image.json").exists():  # another start unpacked it meanwhile
                return bundle
            tmp = self.root / "tmp" / f"{hexdigest}-{uuid.uuid4().hex[:8]}"
            with self._lock("layout", shared=True):
                try:
                    tools.unpack(self.layout, ref, tmp)
                    config = tools.image_config(self.layout, digest)
                except ImageError:
                    shutil.rmtree(tmp, ignore_errors=True)
                    raise
            (tmp / "image.json").write_text(json.dumps(config))
            os.replace(tmp, bundle)
        with self._index() as index:
            index["sizes"][digest] = _tree_size(bundle)
        return bundle

    # --- listing, removing, collecting -------------------------------------------------------

    def _info(self, name: str, index: dict[str, Any]) -> ImageInfo:
        e = index["images"][name]
        size = int(e.get("blobBytes", 0)) + int(index["sizes"].get(e["digest"], 0))
        return ImageInfo(name, e["digest"], size, e["importedAt"], e["lastUsed"], e["source"],
                         access_of(e))

    def list(self) -> list[ImageInfo]:
        index = self._read_index()
        return [self._info(name, index) for name in sorted(index["images"])]

    def in_use(self) -> set[str]:
        """Digests of images that task dirs on this node use (until the task is removed), or
        wait for (their `pulling.json`: e.g. an image imported, not yet unpacked for them)."""
        used, waited = set(), set()
        with contextlib.suppress(OSError):
            for entry in os.scandir(self.tasks_dir):
                task = read_json(Path(entry.path) / "task.json")
                if isinstance(task, dict) and task.get("imageDigest"):
                    used.add(str(task["imageDigest"]))
                wait = read_json(Path(entry.path) / WAIT_MARKER)
                if isinstance(wait, dict) and isinstance(wait.get("image"), str):
                    waited.add(wait["image"])
        images = self._read_index()["images"] if waited else {}
        return used | {images[name]["digest"] for name in waited if name in images}

    def remove(self, ref: str) -> None:
        """Remove `ref` from the node; ImageError if it is unknown or a task uses it."""
        name = normalize(ref)
        with self._lock("layout"):
            index = self._read_index()
            entry = index["images"].get(name)
            if entry is None:
                raise ImageError(f"no image {name} on this node")
            if entry["digest"] in self.in_use():
                raise ImageError(f"image {name} is used by a task on this node")
            self._drop(name)
            tools.collect_garbage(self.layout)

    def _drop(self, name: str) -> None:
        """Forget `name` (layout lock held); its unpacked root goes when no name needs it."""
        with self._index() as index:
            entry = index["images"].pop(name)
            still_named = any(e["digest"] == entry["digest"] for e in index["images"].values())
        tools.remove_ref(self.layout, entry["ref"])
        if not still_named:
            self._drop_unpacked(entry["digest"])

    def _drop_unpacked(self, digest: str) -> None:
        hexdigest = digest.partition(":")[2]
        with self._lock(hexdigest, block=False) as got:
            if got:
                shutil.rmtree(self.unpacked_dir / hexdigest, ignore_errors=True)
                with self._index() as index:
                    index["sizes"].pop(digest, None)

    def gc(self, budget_gb: float | None = None) -> list[str]:
        """Remove least recently used images not in use until the store fits its budget."""
        budget = self.budget if budget_gb is None else int(budget_gb * GB)
        removed: list[str] = []
        with self._lock("layout"):
            index = self._read_index()
            cutoff = time.time() - self.recent_use_s
            busy = self.in_use() | {
                e["digest"] for e in index["images"].values() if e["lastUsed"] > cutoff
            }
            total = sum(self._info(n, index).size for n in index["images"])
            for name in sorted(index["images"], key=lambda n: index["images"][n]["lastUsed"]):
                if total <= budget:
                    break
                if index["images"][name]["digest"] in busy:
                    continue
                total -= self._info(name, index).size
                self._drop(name)
                removed.append(name)
            if removed:
                tools.collect_garbage(self.layout)
        return removed


def _sweep_stale_pulls(tmp: Path) -> None:
    """Delete the layouts of pulls that a crash left behind (none lasts a day)."""
    cutoff = time.time() - STALE_PULL_S
    with contextlib.suppress(OSError):
        for entry in os.scandir(tmp):
            if entry.name.startswith("pull-") and entry.stat().st_mtime < cutoff:
                shutil.rmtree(entry.path, ignore_errors=True)


def _ref(name: str) -> str:
    """The layout ref of a name (refs allow fewer characters than image names)."""
    return "img-" + hashlib.sha256(name.encode()).hexdigest()[:32]
