"""NVIDIA MPS for shared GPUs: one MPS control daemon per shared GPU of the node.

The daemon of a GPU is started (`nvidia-cuda-mps-control -d`, with `CUDA_VISIBLE_DEVICES` set
to that GPU's UUID and its own pipe and log dirs) when the first shared task of the GPU is
prepared, and told to quit (`quit` on the stdin of `nvidia-cuda-mps-control`) when the last one
is removed. Each shared task gets the GPU's pipe dir bind-mounted (`env.MPS_PIPE_DIR`) and its
log dir read-only (`env.MPS_LOG_DIR`); `env.mps_env` names them and the limits.

State lives on disk under `root` (the node's storage root `mps/`), so a restarted agent knows
which daemons run and for whom:

    <uuid>/pipe/              CUDA_MPS_PIPE_DIRECTORY of the daemon (its control socket)
    <uuid>/log/               CUDA_MPS_LOG_DIRECTORY (control.log, server.log)
    <uuid>/holders/<key>      one empty file per shared task on the GPU
    <uuid>/started            written once `-d` succeeded, removed after `quit`

Fake GPUs (declared, not detected) get the same dirs, env and mounts; when the binary is not
installed their daemon is skipped and `started` says so. A real GPU without the binary cannot
be shared: its task fails to start (docs/gpu-sharing.md).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuyard.model import GpuDevice
from gpuyard.runtime.env import MPS_LOG_DIR, MPS_PIPE_DIR
from gpuyard.runtime.errors import RuntimeStartError
from gpuyard.runtime.types import TaskLaunch

log = logging.getLogger("gpuyard.runtime.mps")

MPS_CONTROL = "nvidia-cuda-mps-control"
COMMAND_TIMEOUT_S = 30.0
_SAFE_NAME = re.compile(r"[A-Za-z0-9_.-]+")
NO_DAEMON = "none: fake GPU and no nvidia-cuda-mps-control installed\n"


@dataclass(frozen=True, slots=True)
class MpsDirs:
    """The host dirs of one GPU's daemon."""

    base: Path

    @property
    def pipe(self) -> Path:
        return self.base / "pipe"

    @property
    def log(self) -> Path:
        return self.base / "log"

    @property
    def holders(self) -> Path:
        return self.base / "holders"

    @property
    def started(self) -> Path:
        return self.base / "started"


class MpsDaemons:
    """Starts and quits the MPS control daemons of a node's shared GPUs.

    `control`: the `nvidia-cuda-mps-control` to run (a path or a name looked up on PATH when
    needed; tests inject a fake that records its commands).
    """

    def __init__(self, root: Path, control: str = MPS_CONTROL) -> None:
        self.root = root
        self.control = control
        self._lock = threading.Lock()

    def dirs(self, gpu: GpuDevice) -> MpsDirs:
        if not _SAFE_NAME.fullmatch(gpu.uuid):
            raise RuntimeStartError(f"GPU UUID {gpu.uuid!r} cannot name an MPS directory")
        return MpsDirs(self.root / gpu.uuid)

    def acquire(self, launch: TaskLaunch) -> MpsDirs:
        """Hold the MPS daemon of the launch's one shared GPU for it, starting it if needed."""
        if not launch.gpus:
            raise RuntimeStartError(f"shared task {launch.key} has no GPU")
        gpu = launch.gpus[0]
        d = self.dirs(gpu)
        with self._lock:
            for path in (d.pipe, d.log, d.holders):
                path.mkdir(parents=True, exist_ok=True)
            d.pipe.chmod(0o1777)  # tasks run as their own user and must reach the socket
            if not d.started.exists():
                self._start(gpu, d)
            (d.holders / launch.key).touch()
        return d

    def release(self, key: str) -> None:
        """Drop `key` from every GPU it held; quit the daemons nobody holds any more."""
        with self._lock:
            for d in self._all():
                holder = d.holders / key
                if holder.exists():
                    holder.unlink()
                    self._quit_if_unheld(d)

    def sweep(self, keys: Iterable[str]) -> None:
        """Forget holders that are not among `keys` (tasks removed while the agent was down)."""
        present = set(keys)
        with self._lock:
            for d in self._all():
                for holder in list(d.holders.iterdir()) if d.holders.is_dir() else ():
                    if holder.name not in present:
                        holder.unlink()
                self._quit_if_unheld(d)

    def running(self) -> list[str]:
        """UUIDs of the GPUs whose daemon is started (or skipped for a fake GPU)."""
        return sorted(d.base.name for d in self._all() if d.started.exists())

    # --- the daemon -------------------------------------------------------------------------

    def _all(self) -> list[MpsDirs]:
        if not self.root.is_dir():
            return []
        return [MpsDirs(p) for p in sorted(self.root.iterdir()) if p.is_dir()]

    def _binary(self) -> str | None:
        return shutil.which(self.control)

    def _env(self, d: MpsDirs, gpu_uuid: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            CUDA_VISIBLE_DEVICES=gpu_uuid,
            CUDA_MPS_PIPE_DIRECTORY=str(d.pipe),
            CUDA_MPS_LOG_DIRECTORY=str(d.log),
        )
        return env

    def _start(self, gpu: GpuDevice, d: MpsDirs) -> None:
        binary = self._binary()
        if binary is None and gpu.fake:
            log.info("no %s: MPS daemon skipped for fake GPU %s", self.control, gpu.uuid)
            d.started.write_text(NO_DAEMON)
            return
        if binary is None:
            raise RuntimeStartError(
                f"{self.control} is not installed on this node: GPU {gpu.index} cannot be shared "
                "(install the NVIDIA driver's MPS utilities)"
            )
        done = self._run([binary, "-d"], d, gpu.uuid, None)
        if done.returncode != 0:
            raise RuntimeStartError(
                f"the MPS control daemon of GPU {gpu.index} did not start "
                f"(exit {done.returncode}): {_tail(done)}"
            )
        d.started.write_text(f"{binary}\n")
        log.info("MPS control daemon started for GPU %s", gpu.uuid)

    def _quit_if_unheld(self, d: MpsDirs) -> None:
        if not d.started.exists() or any(d.holders.iterdir()):
            return
        started_by = d.started.read_text().strip()
        if started_by and not started_by.startswith("none"):
            done = self._run([started_by], d, d.base.name, "quit\n")
            if done.returncode != 0:
                log.warning("MPS daemon of %s did not quit: %s", d.base.name, _tail(done))
                return
            log.info("MPS control daemon of GPU %s quit", d.base.name)
        d.started.unlink()

    def _run(
        self, argv: list[str], d: MpsDirs, gpu_uuid: str, stdin: str | None
    ) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(
                argv,
                input=stdin,
                env=self._env(d, gpu_uuid),
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            return subprocess.CompletedProcess(argv, 127, "", str(e))


def mps_mounts(d: MpsDirs) -> list[dict[str, Any]]:
    """The GPU's pipe dir (read-write: clients write to the control socket) and its log dir
    (read-only) as OCI bind mounts at `env.MPS_PIPE_DIR` and `env.MPS_LOG_DIR`."""
    return [
        {"destination": MPS_PIPE_DIR, "type": "bind", "source": str(d.pipe),
         "options": ["rbind", "rw", "nosuid", "nodev"]},
        {"destination": MPS_LOG_DIR, "type": "bind", "source": str(d.log),
         "options": ["rbind", "ro", "nosuid", "nodev"]},
    ]  # fmt: skip


def _tail(done: subprocess.CompletedProcess[str]) -> str:
    text = (done.stderr or done.stdout or "").strip()
    return text[-500:] or "no output"
