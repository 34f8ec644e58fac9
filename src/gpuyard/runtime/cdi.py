"""CDI (Container Device Interface) specs: finding a GPU's device and applying its edits.

A CDI spec is a YAML or JSON file in `/etc/cdi` or `/var/run/cdi` (later dirs win, as in the
CDI reference library), such as the one `nvidia-ctk cdi generate` writes:

    cdiVersion: 0.5.0
    kind: nvidia.com/gpu
    devices:
    - name: "0"                        # also the UUID (GPU-...), and "all"
      containerEdits: {deviceNodes: [{path: /dev/nvidia0}]}
    containerEdits:                    # common edits: once, if any device of the spec is used
      env: [NVIDIA_VISIBLE_DEVICES=void]
      deviceNodes: [{path: /dev/nvidiactl}, {path: /dev/nvidia-uvm}, ...]
      mounts: [{hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15, containerPath: ...,
                options: [ro, nosuid, nodev, bind]}]
      hooks: [{hookName: createContainer, path: /usr/bin/nvidia-ctk, args: [nvidia-ctk, hook,
               update-ldcache, ...]}]

`CdiRegistry.load` reads the specs of one kind; `edits_for` gives, for the requested devices,
each spec's common edits (once) followed by each device's own, as the reference library's
`InjectDevices` collects them; `apply_edits` applies them with the reference semantics:

- `env`: set in the process env, replacing a variable of the same name (except `protected`
  names, which the platform owns);
- `deviceNodes`: `hostPath` defaults to `path`; missing type/major/minor/fileMode are read from
  the host node; a node replaces one at the same path and a `c`/`b` node is allowed in the
  device cgroup with its `permissions` (default `rwm`); owned by the task's non-root user;
- `mounts`: replace a mount at the same destination, then all mounts are ordered by depth
  (parents first) and destination;
- `hooks`: appended to `hooks.<hookName>` (prestart, createRuntime, createContainer,
  startContainer, poststart, poststop; another name is an error);
- `additionalGids`: added to the process user (0 ignored). `intelRdt` is not supported.

Anything wrong (bad file, unknown device, a mount source or node that is missing) is a
`CdiError`: the CDI spec asks runtimes to surface such errors, never to skip them.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpuyard.runtime.devices import (
    Config,
    DeviceError,
    DeviceNode,
    add_device,
    host_device,
)

log = logging.getLogger(__name__)

CDI_DIRS = (Path("/etc/cdi"), Path("/var/run/cdi"))
NVIDIA_GPU_KIND = "nvidia.com/gpu"
SPEC_SUFFIXES = (".yaml", ".yml", ".json")
MAX_SPEC_BYTES = 16 << 20
MAX_CACHED_SPECS = 64
YamlLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: ~10x faster
HOOK_NAMES = (
    "prestart",
    "createRuntime",
    "createContainer",
    "startContainer",
    "poststart",
    "poststop",
)
Edits = dict[str, Any]


class CdiError(Exception):
    """A CDI spec cannot be read or applied."""


@dataclass(frozen=True, slots=True)
class CdiSpec:
    path: Path
    kind: str
    common: Edits
    devices: dict[str, Edits]


@dataclass(slots=True)
class CdiRegistry:
    """The devices of one kind across spec files; a later file's device wins."""

    kind: str
    specs: list[CdiSpec] = field(default_factory=list)
    owner: dict[str, CdiSpec] = field(default_factory=dict)  # device name → its spec

    @classmethod
    def load(cls, dirs: Iterable[Path] = CDI_DIRS, kind: str = NVIDIA_GPU_KIND) -> CdiRegistry:
        registry = cls(kind)
        for path in spec_files(dirs):
            spec = cached_spec(path)
            if spec.kind == kind:
                registry.add(spec)
        return registry

    def add(self, spec: CdiSpec) -> None:
        self.specs.append(spec)
        for name in spec.devices:
            self.owner[name] = spec

    def __bool__(self) -> bool:
        return bool(self.specs)

    def find(self, names: Iterable[str]) -> str | None:
        """The first of `names` that a spec defines."""
        return next((n for n in names if n in self.owner), None)

    def edits_for(self, names: Iterable[str]) -> list[Edits]:
        """Common edits of each spec involved (once, first use), each device's own edits."""
        out: list[Edits] = []
        seen: set[Path] = set()
        for name in names:
            spec = self.owner.get(name)
            if spec is None:
                raise CdiError(f"CDI device {self.kind}={name} is not in any CDI spec")
            if spec.path not in seen:
                seen.add(spec.path)
                out.append(spec.common)
            out.append(spec.devices[name])
        return out


def spec_files(dirs: Iterable[Path]) -> list[Path]:
    """Spec files of each dir in name order, dir after dir (missing dirs are skipped)."""
    files: list[Path] = []
    for d in dirs:
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError):
            continue
        files.extend(Path(e.path) for e in entries if e.name.endswith(SPEC_SUFFIXES))
    return files


_cache: dict[Path, tuple[tuple[int, int, int], CdiSpec]] = {}


def cached_spec(path: Path) -> CdiSpec:
    """`read_spec`, parsed again only when the file changed (a task start reads every spec)."""
    try:
        st = path.stat()
    except OSError as e:
        raise CdiError(f"cannot read CDI spec {path}: {e}") from e
    key = (st.st_ino, st.st_size, st.st_mtime_ns)
    hit = _cache.get(path)
    if hit is not None and hit[0] == key:
        return hit[1]
    spec = read_spec(path)
    if len(_cache) >= MAX_CACHED_SPECS:
        _cache.clear()
    _cache[path] = (key, spec)
    return spec


def read_spec(path: Path) -> CdiSpec:
    try:
        text = path.read_bytes()[:MAX_SPEC_BYTES]
        raw = json.loads(text) if path.suffix == ".json" else yaml.load(text, YamlLoader)
    except (OSError, ValueError, yaml.YAMLError) as e:
        raise CdiError(f"cannot read CDI spec {path}: {e}") from e
    return parse_spec(path, raw)


def parse_spec(path: Path, raw: Any) -> CdiSpec:
    if not isinstance(raw, dict) or not raw.get("cdiVersion") or not raw.get("kind"):
        raise CdiError(f"CDI spec {path}: expected a mapping with cdiVersion and kind")
    devices: dict[str, Edits] = {}
    for entry in raw.get("devices") or []:
        if not isinstance(entry, dict) or not entry.get("name"):
            raise CdiError(f"CDI spec {path}: every device needs a name")
        devices[str(entry["name"])] = _edits(path, entry.get("containerEdits"))
    return CdiSpec(path, str(raw["kind"]), _edits(path, raw.get("containerEdits")), devices)


def _edits(path: Path, raw: Any) -> Edits:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise CdiError(f"CDI spec {path}: containerEdits must be a mapping")
    return raw


# --- applying edits ------------------------------------------------------------------------


def apply_edits(
    config: Config,
    edits: Edits,
    protected: Callable[[str], bool] = lambda _name: False,
    skip_node: Callable[[str], bool] = lambda _path: False,
) -> None:
    """Apply one `containerEdits` to an OCI config, in place (see the module doc)."""
    set_env(config, edits.get("env") or [], protected)
    for raw in edits.get("deviceNodes") or []:
        node = device_node(raw)
        if skip_node(node.path):
            log.warning("CDI device node %s left out: not one of the task's GPUs", node.path)
            continue
        add_device(config, node)
    if edits.get("mounts"):
        for raw in edits["mounts"]:
            add_mount(config, raw)
        config["mounts"] = sorted(config["mounts"], key=mount_order)
    for raw in edits.get("hooks") or []:
        add_hook(config, raw)
    add_gids(config, edits.get("additionalGids") or [])
    if edits.get("intelRdt"):
        log.warning("CDI intelRdt edits are not supported; left out")


def set_env(config: Config, entries: list[str], protected: Callable[[str], bool]) -> None:
    env = config["process"]["env"]
    for entry in entries:
        name, sep, _ = str(entry).partition("=")
        if not sep or not name or protected(name):
            continue
        env[:] = [e for e in env if e.partition("=")[0] != name]
        env.append(str(entry))


def device_node(raw: dict[str, Any]) -> DeviceNode:
    """A CDI deviceNode with its missing information read from the host node."""
    path = raw.get("path")
    if not path:
        raise CdiError(f"CDI deviceNode without a path: {raw}")
    host_path = raw.get("hostPath") or path
    access = str(raw.get("permissions") or "rwm")
    try:
        node = host_device(host_path, path, access)
    except DeviceError as e:
        raise CdiError(f"CDI {e}") from e
    return _override(node, raw)


def _override(node: DeviceNode, raw: dict[str, Any]) -> DeviceNode:
    """Values the spec states win over the host's (as in CDI's fillMissingInfo)."""
    kind = raw.get("type") or node.type
    if kind not in ("c", "b", "u", "p"):
        raise CdiError(f"CDI deviceNode {node.path}: unknown type {kind!r}")
    return DeviceNode(
        path=node.path,
        host_path=node.host_path,
        type=kind,
        major=int(raw["major"]) if raw.get("major") is not None else node.major,
        minor=int(raw["minor"]) if raw.get("minor") is not None else node.minor,
        file_mode=int(raw["fileMode"]) if raw.get("fileMode") is not None else node.file_mode,
        access=node.access,
    )


def add_mount(config: Config, raw: dict[str, Any]) -> None:
    source, destination = raw.get("hostPath"), raw.get("containerPath")
    if not source or not destination:
        raise CdiError(f"CDI mount needs hostPath and containerPath: {raw}")
    options = [str(o) for o in raw.get("options") or []]
    is_bind = not raw.get("type") or any(o in ("bind", "rbind") for o in options)
    if is_bind and not os.path.exists(source):
        raise CdiError(f"CDI mount source {source} does not exist on this node")
    mount = {
        "destination": destination,
        "type": raw.get("type") or "bind",
        "source": source,
        "options": options or ["bind"],
    }
    config["mounts"] = [m for m in config["mounts"] if m["destination"] != destination]
    config["mounts"].append(mount)


def mount_order(mount: dict[str, Any]) -> tuple[int, str]:
    """Fewer path parts first (a parent before what is mounted inside it), then by name."""
    destination = os.path.normpath(mount["destination"])
    return destination.count("/"), destination


def add_hook(config: Config, raw: dict[str, Any]) -> None:
    name = raw.get("hookName")
    if name not in HOOK_NAMES:
        raise CdiError(f"CDI hook with unknown hookName {name!r}")
    if not str(raw.get("path") or "").startswith("/"):
        raise CdiError(f"CDI hook {name} needs an absolute path: {raw}")
    hook: dict[str, Any] = {"path": raw["path"]}
    for key in ("args", "env"):
        if raw.get(key):
            hook[key] = [str(v) for v in raw[key]]
    if raw.get("timeout"):
        hook["timeout"] = int(raw["timeout"])
    config.setdefault("hooks", {}).setdefault(name, []).append(hook)


def add_gids(config: Config, gids: list[int]) -> None:
    user = config["process"]["user"]
    for gid in gids:
        if int(gid) != 0 and int(gid) not in user.setdefault("additionalGids", []):
            user["additionalGids"].append(int(gid))
