"""The image tools, driven as subprocesses: skopeo (copy between transports) and umoci.

Plus small readers of an OCI image layout (`index.json`, manifests and config blobs), and the
detection of what an archive to import holds. Every failure is an `ImageError` whose message
names the tool and ends with its own error line.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import hashlib
import json
import lzma
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gpuyard.runtime.errors import ImageError

TOOL_TIMEOUT_S = 600.0
POLICY = Path("/etc/containers/policy.json")
REF_ANNOTATION = "org.opencontainers.image.ref.name"
FORMATS = ("auto", "rootfs", "oci-archive", "docker-archive")


def tool(name: str) -> str:
    """The path of `name`, or ImageError saying which package to install."""
    path = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/bin")
    if path is None:
        raise ImageError(f"{name} is not installed on this node (apt-get install {name})")
    return path


def run_tool(
    args: list[str], timeout: float = TOOL_TIMEOUT_S, env: dict[str, str] | None = None
) -> str:
    """Run a tool; its stdout, or ImageError with the last line it wrote to stderr."""
    return run_tool_bytes(args, timeout, env).decode(errors="replace")


def run_tool_bytes(
    args: list[str], timeout: float = TOOL_TIMEOUT_S, env: dict[str, str] | None = None
) -> bytes:
    """`run_tool`, its stdout as the tool wrote it (a manifest hashed as served)."""
    verb = next((a for a in args[1:] if not a.startswith("-")), "")  # `copy`, `unpack`
    try:
        done = subprocess.run(
            [tool(args[0]), *args[1:]],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
            env=env,
        )
    except subprocess.TimeoutExpired:
        raise ImageError(f"{args[0]} {verb} timed out after {timeout:g}s") from None
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines() or ["(no output)"]
        message = re.search(r'msg="(.*)"', lines[-1])  # skopeo's logrus line
        cause = message[1].replace('\\"', '"') if message else lines[-1]
        raise ImageError(f"{args[0]} {verb} failed: {cause}")
    return done.stdout


def skopeo_copy(
    source: str,
    destination: str,
    timeout: float = TOOL_TIMEOUT_S,
    tls_verify: bool = True,
    authfile: Path | None = None,
) -> None:
    """`skopeo copy SOURCE DESTINATION` (transport:reference on both sides).

    skopeo gets the timeout too (`--command-timeout`), so that one left behind by a server
    killed mid-pull ends by itself; `tls_verify=False` lets a `docker://` source be an
    insecure (plain HTTP or self-signed) registry; `authfile` is the source's only auth file
    (its path is on the command line, never a credential: registryauth.py).
    """
    policy = [] if POLICY.exists() else ["--insecure-policy"]
    limit = [f"--command-timeout={max(1, int(timeout))}s"]
    tls = [] if tls_verify else ["--src-tls-verify=false"]
    auth = [f"--src-authfile={authfile}"] if authfile is not None else []
    args = ["skopeo", *policy, *limit, "copy", "--quiet", *tls, *auth, source, destination]
    run_tool(args, timeout + 5, _auth_only(authfile) if authfile is not None else None)


def skopeo_manifest_digest(
    source: str,
    timeout: float = TOOL_TIMEOUT_S,
    tls_verify: bool = True,
    authfile: Path | None = None,
) -> str:
    """The digest of the manifest that `source` (`docker://NAME:TAG`) names at its registry
    now: `skopeo inspect --raw` (the manifest alone, no config or layer fetched), hashed as
    the registry served it. The auth file as `skopeo_copy` takes it (its only one)."""
    limit = [f"--command-timeout={max(1, int(timeout))}s"]
    tls = [] if tls_verify else ["--tls-verify=false"]
    auth = [f"--authfile={authfile}"] if authfile is not None else []
    args = ["skopeo", *limit, "inspect", "--raw", *tls, *auth, source]
    raw = run_tool_bytes(args, timeout + 5, _auth_only(authfile) if authfile is not None else None)
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def _auth_only(authfile: Path) -> dict[str, str]:
    """An environment in which skopeo finds no auth file but `authfile`: skopeo 1.9 reads
    `~/.docker/config.json` and `$XDG_RUNTIME_DIR/containers/auth.json` even when given
    `--src-authfile` (a task would pull with the node's credentials), so every place it looks
    is the auth file's own private dir."""
    private = str(authfile.parent)
    env = {k: v for k, v in os.environ.items() if k not in ("REGISTRY_AUTH_FILE",)}
    env.update(HOME=private, XDG_RUNTIME_DIR=private, XDG_CONFIG_HOME=private,
               DOCKER_CONFIG=private)
    return env


def merge_layout(staging: Path, layout: Path, ref: str) -> None:
    """Add image `ref` of the layout `staging` to `layout`: its blobs hard-linked (no copy
    when both are on one filesystem), then `skopeo copy`, which finds every blob there."""
    source = staging / "blobs"
    for blob_file in source.rglob("*"):
        target = layout / "blobs" / blob_file.relative_to(source)
        if blob_file.is_file() and not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(OSError):  # another filesystem: skopeo copies it
                os.link(blob_file, target)
    skopeo_copy(f"oci:{staging}:{ref}", f"oci:{layout}:{ref}")


def umoci(*args: str) -> str:
    return run_tool(["umoci", *args])


def detect_format(path: Path) -> str:
    """`oci-archive`, `docker-archive` or `rootfs` by the archive's top-level entries."""
    try:
        with tarfile.open(path) as tar:
            names = {m.name.removeprefix("./").rstrip("/") for m in tar}
    except (OSError, tarfile.TarError, EOFError) as e:
        raise ImageError(f"{path} is not a readable tar archive: {e}") from e
    if "oci-layout" in names and "index.json" in names:
        return "oci-archive"
    if "manifest.json" in names:
        return "docker-archive"
    if not names - {""}:
        raise ImageError(f"{path} is an empty archive")
    return "rootfs"


# what a compressed tarball starts with → how to read it (tarfile reads them all; `umoci raw
# add-layer` takes a plain tar only, and stores a compressed one as a layer no unpack can read)
Opener = Callable[..., Any]  # gzip.open, bz2.open, lzma.open: (path, "rb") -> a binary file
COMPRESSIONS: tuple[tuple[bytes, str, Opener], ...] = (
    (b"\x1f\x8b", "gzip", gzip.open),
    (b"BZh", "bzip2", bz2.open),
    (b"\xfd7zXZ\x00", "xz", lzma.open),
)


def compression_of(path: Path) -> tuple[str, Opener] | None:
    """The compression of the file at `path` (its name and opener), None for a plain file."""
    with open(path, "rb") as f:
        head = f.read(8)
    return next(
        ((name, opener) for magic, name, opener in COMPRESSIONS if head.startswith(magic)), None
    )


@contextlib.contextmanager
def plain_tar(tarball: Path, work: Path) -> Iterator[Path]:
    """`tarball` itself if it is a plain tar, else a decompressed copy in a temporary dir
    under `work` (removed after)."""
    found = compression_of(tarball)
    if found is None:
        yield tarball
        return
    name, opener = found
    with tempfile.TemporaryDirectory(dir=work, prefix="import-") as tmp:
        plain = Path(tmp) / "rootfs.tar"
        try:
            with opener(tarball, "rb") as src, open(plain, "wb") as dst:
                shutil.copyfileobj(src, dst, 1024 * 1024)
        except (OSError, EOFError, lzma.LZMAError) as e:
            raise ImageError(f"{tarball} is not a readable {name}-compressed tar: {e}") from e
        yield plain


def import_rootfs_tar(tarball: Path, layout: Path, ref: str) -> None:
    """A one-layer OCI image from a rootfs tarball (plain, or gzip/bzip2/xz-compressed:
    decompressed first): umoci new + raw add-layer."""
    with plain_tar(tarball, layout.parent) as plain:
        umoci("new", "--image", f"{layout}:{ref}")
        umoci("raw", "add-layer", "--image", f"{layout}:{ref}", str(plain))


def init_layout(layout: Path) -> None:
    if not (layout / "oci-layout").exists():
        umoci("init", "--layout", str(layout))


def unpack(layout: Path, ref: str, bundle: Path) -> None:
    """`umoci unpack`: `bundle/rootfs` holds the image's files, owned as in the image."""
    umoci("unpack", "--image", f"{layout}:{ref}", str(bundle))


def remove_ref(layout: Path, ref: str) -> None:
    umoci("rm", "--image", f"{layout}:{ref}")


def collect_garbage(layout: Path) -> None:
    """Delete blobs no ref reaches any more."""
    umoci("gc", "--layout", str(layout))


# --- reading the layout ---------------------------------------------------------------------


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError) as e:
        raise ImageError(f"cannot read {path}: {e}") from e


def blob(layout: Path, digest: str) -> Path:
    algorithm, _, hexdigest = digest.partition(":")
    return layout / "blobs" / algorithm / hexdigest


def manifest_digest(layout: Path, ref: str) -> str:
    """The digest of the manifest that `ref` names in the layout's index."""
    for desc in _read_json(layout / "index.json").get("manifests", []):
        if desc.get("annotations", {}).get(REF_ANNOTATION) == ref:
            return str(desc["digest"])
    raise ImageError(f"no image {ref!r} in {layout}")


def manifest(layout: Path, digest: str) -> dict[str, Any]:
    return _read_json(blob(layout, digest))


def image_config(layout: Path, digest: str) -> dict[str, Any]:
    """The image config's `config` object (Entrypoint, Cmd, Env, WorkingDir, User)."""
    config = _read_json(blob(layout, manifest(layout, digest)["config"]["digest"]))
    return config.get("config") or {}


def compressed_size(layout: Path, digest: str) -> int:
    """Bytes of the image's blobs (manifest, config, layers) as stored."""
    m = manifest(layout, digest)
    descs = [m.get("config", {}), *m.get("layers", [])]
    return sum(int(d.get("size", 0)) for d in descs)
