"""The state dir of one task on its node, and the small files in it.

Layout of `<state_root>/tasks/<key>/` (the only place a task's state lives, so that a
restarted server finds every task again):

    launch.json      the TaskLaunch, as given (for adoption and debugging)
    task.json        what the supervisor needs: OCI runtime, container id, cgroup, bundle
    bundle/config.json  the OCI runtime spec
    work/            the task's private writable dir, `/workspace` inside the container
    log              stdout + stderr of the container, appended, readable while it runs
    supervisor.pid   {"pid", "starttime"} of the supervisor (starttime guards against pid reuse)
    supervisor.log   the supervisor's own diagnostics
    runtime.log      crun/runc's own log (json lines), the source of start-failure messages
    started          {"startedAt"}: written once the container runs (STARTING → RUNNING)
    stop.json        {"graceS", "requestedAt"}: a stop request
    exit.json        {"exitCode", "reason", "finishedAt", "message", "stopRequested"}

Every JSON file is written atomically (temporary file + rename), so a reader never sees half
of one, with mode 0600 (`launch.json` and `config.json` hold the job's env, secrets too).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path
from typing import Any

from gpuyard.runtime.notify import notify
from gpuyard.runtime.types import TaskExit

KEY_RE = re.compile(r"[A-Za-z0-9_.-]{1,128}")


def check_key(key: str) -> str:
    """`key` if it is a safe name (it names a dir, a container and a cgroup), else ValueError."""
    if not KEY_RE.fullmatch(key) or key in (".", ".."):
        raise ValueError(f"bad task key {key!r}: expected 1-128 of [A-Za-z0-9_.-]")
    return key


def atomic_write(path: Path, data: bytes, sync: bool = False) -> None:
    """Write `data` to `path` so that readers see the old file or the new one, never a part."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # a leftover tmp file keeps its mode through O_CREAT
    with open(fd, "wb") as f:
        f.write(data)
        if sync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)


def write_json(path: Path, value: Any, sync: bool = False) -> None:
    """One line (json's C encoder: `indent` would use the slow Python one; `jq .` reads it)."""
    atomic_write(path, json.dumps(value, sort_keys=True).encode() + b"\n", sync)


def read_json(path: Path) -> Any | None:
    """The JSON value in `path`, or None if the file is missing or not valid JSON."""
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None


def exit_to_json(exit_: TaskExit) -> dict[str, Any]:
    return {
        "exitCode": exit_.exit_code,
        "reason": exit_.reason,
        "finishedAt": exit_.finished_at,
        "message": exit_.message,
        "stopRequested": exit_.stop_requested,
    }


def exit_from_json(value: Any) -> TaskExit | None:
    if not isinstance(value, dict) or not isinstance(value.get("reason"), str):
        return None
    code = value.get("exitCode")
    return TaskExit(
        exit_code=code if isinstance(code, int) else None,
        reason=value["reason"],
        finished_at=float(value.get("finishedAt") or 0.0),
        message=str(value.get("message") or ""),
        stop_requested=bool(value.get("stopRequested")),
    )


class TaskDir:
    """Paths and small reads/writes of one task's state dir."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.launch = path / "launch.json"
        self.task = path / "task.json"
        self.bundle = path / "bundle"
        self.config = path / "bundle" / "config.json"
        self.work = path / "work"
        self.log = path / "log"
        self.pid_file = path / "supervisor.pid"
        self.supervisor_log = path / "supervisor.log"
        self.runtime_log = path / "runtime.log"
        self.container_pid = path / "container.pid"
        self.started = path / "started"
        self.stop_file = path / "stop.json"
        self.exit_file = path / "exit.json"

    @property
    def key(self) -> str:
        return self.path.name

    @property
    def state_root(self) -> Path:
        return self.path.parent.parent  # <state_root>/tasks/<key>

    def read_exit(self) -> TaskExit | None:
        return exit_from_json(read_json(self.exit_file))

    def write_exit(self, exit_: TaskExit) -> None:
        write_json(self.exit_file, exit_to_json(exit_), sync=True)
        notify(self.state_root, self.key, "exited")

    def started_at(self) -> float | None:
        value = read_json(self.started)
        return float(value["startedAt"]) if isinstance(value, dict) else None

    def mark_started(self, when: float) -> None:
        write_json(self.started, {"startedAt": when})
        notify(self.state_root, self.key, "started")

    def stop_grace(self) -> float | None:
        """The grace of the stop request, or None if no stop was requested through the file."""
        value = read_json(self.stop_file)
        if not isinstance(value, dict):
            return None
        with contextlib.suppress(TypeError, ValueError):
            return max(0.0, float(value.get("graceS", 0.0)))
        return 0.0

    def supervisor(self) -> tuple[int, int] | None:
        """(pid, starttime) of the supervisor as recorded, or None."""
        value = read_json(self.pid_file)
        if not isinstance(value, dict):
            return None
        try:
            return int(value["pid"]), int(value["starttime"])
        except (KeyError, TypeError, ValueError):
            return None


def process_starttime(pid: int) -> int | None:
    """The start time of a live process in clock ticks since boot (/proc/<pid>/stat field 22).

    With the pid it identifies a process for good: a reused pid has another start time.
    None when there is no such process or it has exited (a zombie not yet reaped).
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    if len(fields) < 20 or fields[0] in ("Z", "X") or not fields[19].isdigit():
        return None
    return int(fields[19])
