"""A task's real GPUs in its container: device nodes, device cgroup, driver libraries.

`apply_gpu_setup` edits a task's OCI config after `oci.build_config`:

1. Fake GPUs (declared, no device node) get nothing: they are only the GPU env variables.
2. Real GPUs: `/dev/nvidia<minor>` of each of the task's GPUs, plus `/dev/nvidiactl`,
   `/dev/nvidia-uvm`, `/dev/nvidia-uvm-tools` and `/dev/nvidia-modeset` where the node has
   them, as `linux.devices` (numbers stat'ed from the host node) and in the device cgroup allow
   list, which otherwise holds only runc's default set: the other GPUs' nodes are neither in
   the container nor openable.
3. Driver libraries, first that applies:
   - **Host root** (a task without an image): none added. The host's root already holds the
     driver libraries and their ld cache, and it is read-only in the container, where the CDI
     hooks (`nvidia-ctk hook update-ldcache`, `create-symlinks`) and the toolkit hook would
     have to write.
   - **CDI**: a spec of kind `nvidia.com/gpu` in the CDI dirs (`nvidia-ctk cdi generate`
     writes `/etc/cdi/nvidia.yaml`): its common edits and those of each task GPU's CDI device
     (found by UUID, else index, else `gpu<index>`), applied with CDI semantics (`cdi.py`).
     A GPU missing from the spec fails the start (the spec is stale: regenerate it). The
     platform's env variables are never overridden by the spec (nvidia-ctk's
     `NVIDIA_VISIBLE_DEVICES=void` is not applied), and a spec node of another GPU is left out.
   - **NVIDIA container toolkit hook**: `nvidia-container-runtime-hook prestart` as a
     `prestart` hook (where the toolkit's own runtime puts it). The hook reads
     `NVIDIA_VISIBLE_DEVICES` (the task's UUIDs) and `NVIDIA_DRIVER_CAPABILITIES` from the
     container's env; they are in the hook's env too.
   - **Neither**: device nodes only. The task is not refused: in host-root mode the host's
     driver libraries are in the root anyway, and an image may bring a user-space driver that
     matches the node's kernel module. A warning says so, and `task.json` records it.

`GpuSetup` says where to look (`dev_root`, `cdi_dirs`, `hook`); tests point it at a dir of
`mknod`-made nodes and their own CDI spec. `from_env` reads `GPUYARD_DEV_ROOT`,
`GPUYARD_CDI_DIRS` (`:`-separated) and `GPUYARD_NVIDIA_HOOK` (a name on PATH or a path; empty:
never the hook).
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpuyard.model import GpuDevice
from gpuyard.runtime.cdi import CDI_DIRS, CdiError, CdiRegistry, apply_edits
from gpuyard.runtime.devices import Config, DeviceError, add_device, is_gpu_node, nvidia_nodes
from gpuyard.runtime.env import CAPABILITIES_VAR, DEFAULT_PATH, is_platform_env
from gpuyard.runtime.errors import RuntimeStartError

log = logging.getLogger(__name__)

HOOK_NAME = "nvidia-container-runtime-hook"
HOOK_PATH = f"{DEFAULT_PATH}:/usr/local/nvidia/toolkit"


class DriverMode:
    """How a task's GPU driver libraries come in (recorded in task.json as `gpuDriver`)."""

    NONE = "none"  # no real GPU
    HOST_ROOT = "host-root"  # the host's own libraries, in its read-only root
    CDI = "cdi"
    HOOK = "hook"
    DEVICES_ONLY = "devices-only"


@dataclass(frozen=True, slots=True)
class GpuSetup:
    dev_root: Path = Path("/dev")
    cdi_dirs: tuple[Path, ...] = CDI_DIRS
    hook: str | None = HOOK_NAME

    @classmethod
    def from_env(cls) -> GpuSetup:
        dirs = os.environ.get("GPUYARD_CDI_DIRS")
        hook = os.environ.get("GPUYARD_NVIDIA_HOOK", HOOK_NAME)
        return cls(
            dev_root=Path(os.environ.get("GPUYARD_DEV_ROOT") or "/dev"),
            cdi_dirs=tuple(Path(d) for d in dirs.split(":") if d) if dirs else CDI_DIRS,
            hook=hook or None,
        )


def apply_gpu_setup(
    config: Config, gpus: Sequence[GpuDevice], setup: GpuSetup, host_root: bool = False
) -> str:
    """Edit `config` for the task's real GPUs; the `DriverMode` used. RuntimeStartError if a
    device node or the CDI spec is wrong. `host_root`: the task runs on the host's root."""
    real = [g for g in gpus if not g.fake]
    if not real:
        return DriverMode.NONE
    try:
        for node in nvidia_nodes(real, setup.dev_root):
            add_device(config, node)
        return DriverMode.HOST_ROOT if host_root else _add_driver(config, real, setup)
    except (DeviceError, CdiError) as e:
        raise RuntimeStartError(f"cannot give the task its GPUs: {e}") from e


def _add_driver(config: Config, gpus: list[GpuDevice], setup: GpuSetup) -> str:
    registry = CdiRegistry.load(setup.cdi_dirs)
    if registry:
        apply_cdi(config, gpus, registry)
        return DriverMode.CDI
    hook = find_hook(setup.hook)
    if hook is not None:
        add_toolkit_hook(config, hook)
        return DriverMode.HOOK
    log.warning(
        "no CDI spec in %s and no %s: GPUs without driver libraries (the image must bring them)",
        ", ".join(map(str, setup.cdi_dirs)),
        HOOK_NAME,
    )
    return DriverMode.DEVICES_ONLY


def cdi_name(gpu: GpuDevice, registry: CdiRegistry) -> str:
    """The GPU's CDI device name: its UUID, else its index, else `gpu<index>`."""
    name = registry.find((gpu.uuid, str(gpu.index), f"gpu{gpu.index}"))
    if name is None:
        raise CdiError(
            f"GPU {gpu.index} ({gpu.uuid}) is in no CDI spec of kind {registry.kind} "
            f"({', '.join(str(s.path) for s in registry.specs)}); "
            "regenerate it with `nvidia-ctk cdi generate`"
        )
    return name


def apply_cdi(config: Config, gpus: list[GpuDevice], registry: CdiRegistry) -> None:
    names = [cdi_name(g, registry) for g in gpus]
    skip = other_gpu_node(gpus)
    for edits in registry.edits_for(names):
        apply_edits(config, edits, protected=is_platform_env, skip_node=skip)


def other_gpu_node(gpus: list[GpuDevice]) -> Callable[[str], bool]:
    """True for `/dev/nvidia<N>` of a GPU that is not the task's (where all minors are known)."""
    minors = {g.minor for g in gpus}

    def other(path: str) -> bool:
        minor = is_gpu_node(path)
        return minor is not None and None not in minors and minor not in minors

    return other


def find_hook(hook: str | None) -> str | None:
    """The hook's absolute path: `hook` itself if it is a path, else looked up on PATH."""
    if not hook:
        return None
    if "/" in hook:
        return hook if os.access(hook, os.X_OK) else None
    path = os.environ.get("PATH", "")
    return shutil.which(hook, path=f"{path}:{HOOK_PATH}" if path else HOOK_PATH)


def env_value(config: Config, name: str) -> str:
    for entry in config["process"]["env"]:
        key, _, value = entry.partition("=")
        if key == name:
            return value
    return ""


def add_toolkit_hook(config: Config, hook: str) -> None:
    """`<hook> prestart` with the variables it reads, as the NVIDIA runtime inserts it."""
    env = [f"PATH={DEFAULT_PATH}"] + [
        f"{name}={env_value(config, name)}"
        for name in ("NVIDIA_VISIBLE_DEVICES", CAPABILITIES_VAR)
    ]
    entry = {"path": hook, "args": [os.path.basename(hook), "prestart"], "env": env}
    config.setdefault("hooks", {}).setdefault("prestart", []).append(entry)
