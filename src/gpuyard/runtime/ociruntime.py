"""The OCI runtime binary (crun or runc): finding it, probing it, and its command lines.

Which runtime: the one asked for (argument, else the `GPUYARD_OCI_RUNTIME` env var: `crun`,
`runc` or a path), else crun if it really runs a container here, else runc. "Really runs" is
a probe: one trivial container (`true`) with the same kind of config as a task (host root,
cgroup limits), run once per process and runtime and cached. crun is preferred (faster, C,
cgroup v2 native); it refuses hybrid cgroup v1 hosts that lack a hugetlb v1 mount, and then
runc is used. A runtime asked for by name is probed too, so a broken one fails at start-up
with its own error message rather than on every task.

Both binaries take the same arguments for what is used here (`--root`, `--log`,
`--log-format json`, `create --bundle --pid-file`, `start`, `kill [--all]`, `delete --force`).
Their state lives under /run/gpuyard/<name> (tmpfs: it goes away with a reboot, as do the
containers), apart from other users of crun/runc on the host.

Starting a created crun container without a second crun process: `crun create` leaves the
container's init blocked reading `<root>/<id>/exec.fifo`, and all `crun start` does besides
re-reading the container's state is to open that fifo for writing, unlink it and write one
byte, then run the config's `poststart` hooks. `release_exec_fifo` does the same in the
caller's process (4–6 ms less per start here: docs/runtime.md), for crun only and only for
a config without `poststart` hooks; when the fifo is not there (another layout) or has no
reader (the init is gone), it answers False and the caller runs `<rt> start`, which reports
the error in its own words. runc's fifo goes the other way (its init writes), and runc keeps
`runc start`.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuyard.runtime.errors import RuntimeUnavailable
from gpuyard.runtime.oci import build_config
from gpuyard.runtime.rootfs import Rootfs
from gpuyard.runtime.taskdir import write_json
from gpuyard.runtime.types import TaskLaunch

KNOWN = ("crun", "runc")
ENV_VAR = "GPUYARD_OCI_RUNTIME"
STATE_ROOT = Path("/run/gpuyard")
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PROBE_TIMEOUT_S = 30.0

_probe_cache: dict[str, str | None] = {}  # binary path → None (works) or the error
_probe_lock = threading.Lock()
_probe_seq = itertools.count()


@dataclass(frozen=True, slots=True)
class OciRuntime:
    """One OCI runtime binary and the state dir (`--root`) gpuyard gives it."""

    name: str  # crun | runc
    path: str
    root: str

    def command(self, *args: str, log: Path | None = None) -> list[str]:
        cmd = [self.path, "--root", self.root]
        if log is not None:
            cmd += ["--log", str(log), "--log-format", "json"]
        return [*cmd, *args]

    @property
    def starts_by_fifo(self) -> bool:
        """Whether `start` only releases the container's exec fifo (crun), so that the
        caller may do it itself (`release_exec_fifo`); runc's fifo goes the other way."""
        return self.name == "crun"

    def exec_fifo(self, container_id: str) -> Path | None:
        """The fifo `start` releases, for a runtime whose start may be done in-process."""
        return Path(self.root, container_id, "exec.fifo") if self.starts_by_fifo else None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.path, "root": self.root}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> OciRuntime:
        return cls(str(value["name"]), str(value["path"]), str(value["root"]))


def release_exec_fifo(fifo: Path) -> bool:
    """Start a created container as `crun start` does (open for writing, unlink, write one
    byte); False, with nothing done, when the fifo cannot be opened: not there, or no init
    reading it (ENXIO). An error after the open is raised (OSError)."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        os.unlink(fifo)
        os.write(fd, b"\0")
    finally:
        os.close(fd)
    return True


def starts_in_process(rt: OciRuntime, config: dict[str, Any]) -> bool:
    """Whether a container of `config` may be started by `release_exec_fifo`."""
    return rt.starts_by_fifo and not (config.get("hooks") or {}).get("poststart")


def find_runtime(name_or_path: str) -> OciRuntime:
    """The runtime for `crun`, `runc` or a path to one of them; RuntimeUnavailable if absent."""
    search = f"{os.environ.get('PATH', '')}:{SYSTEM_PATH}"
    path = shutil.which(name_or_path, path=search)
    base = Path(name_or_path).name
    name = next((k for k in KNOWN if k in base), None)
    if name is None:
        raise RuntimeUnavailable(f"unknown OCI runtime {name_or_path!r}: expected crun or runc")
    if path is None:
        raise RuntimeUnavailable(f"OCI runtime {name_or_path!r} not found (install {name})")
    return OciRuntime(name, path, str(STATE_ROOT / name))


def _probe_launch() -> TaskLaunch:
    key = f"gpuyard-probe-{os.getpid()}-{next(_probe_seq)}"
    return TaskLaunch(
        key=key,
        job_id="probe",
        job_name="probe",
        role="probe",
        index=0,
        attempt=0,
        command="true",
        cpu=0.1,
        memory_mb=64,
        pids_limit=16,
    )


def _run_probe(rt: OciRuntime, rootfs: Rootfs, scratch: Path) -> str | None:
    launch = _probe_launch()
    bundle = scratch / launch.key
    (bundle / "work").mkdir(parents=True, exist_ok=True)
    write_json(bundle / "config.json", build_config(launch, rootfs, bundle / "work"))
    try:
        done = subprocess.run(
            rt.command("run", "--bundle", str(bundle), launch.key),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{rt.name}: {e}"
    finally:
        subprocess.run(
            rt.command("delete", "--force", launch.key),
            capture_output=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
        shutil.rmtree(bundle, ignore_errors=True)
    if done.returncode != 0:
        return f"{rt.name} cannot run a container here: {done.stderr.strip()[-2000:]}"
    return None


def probe(rt: OciRuntime, rootfs: Rootfs, scratch: Path) -> str | None:
    """None if `rt` runs a trivial container here, else its error. Cached per binary."""
    with _probe_lock:
        if rt.path not in _probe_cache:
            _probe_cache[rt.path] = _run_probe(rt, rootfs, scratch)
        return _probe_cache[rt.path]


def pick_runtime(requested: str | None, rootfs: Rootfs, scratch: Path) -> OciRuntime:
    """The runtime to use (see the module docstring); RuntimeUnavailable if none works."""
    requested = requested or os.environ.get(ENV_VAR) or None
    if requested:
        rt = find_runtime(requested)
        error = probe(rt, rootfs, scratch)
        if error:
            raise RuntimeUnavailable(error)
        return rt
    errors = []
    for name in KNOWN:
        try:
            rt = find_runtime(name)
        except RuntimeUnavailable as e:
            errors.append(str(e))
            continue
        error = probe(rt, rootfs, scratch)
        if error is None:
            return rt
        errors.append(error)
    raise RuntimeUnavailable("no OCI runtime works on this host: " + "; ".join(errors))
