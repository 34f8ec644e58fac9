"""Tasks of a node that wait for their image: the `pulling.json` marker, and their launch.

`ContainerRuntime.start` of a task whose image is not ready (`ImageStore.task_needs`: not
pulled, not unpacked, or private and the task's login not checked lately) claims the task dir,
writes `launch.json` and the marker, and returns; the node's `PullQueue` fetches the image (or
has the registry check the task's login: imageaccess.py). The marker says which image and how
its pull stands (`PullState`); `status` reports it as the STARTING task's detail ("pulling
image X", with "attempt n/cap after: ..." once a try failed). The marker is *claimed*
(unlinked, under this object's lock) exactly once, by whichever comes first:

- the pull succeeded: the task is launched from its `launch.json` (`launch` callback: the
  runtime's own preparation and spawn); a failure there ends it as `start` would have failed
  (`ImageError`, `InvalidSpec`, else `AgentError`), recorded in `exit.json`;
- the pull failed for good: `exit.json` says `ImageError` with the cause, or
  `RegistryUnavailable` (a platform failure, which the controller retries with its backoff)
  when every try failed for a transient reason, with the count;
- a stop: `exit.json` says `Cancelled`, and the task leaves the pull's waiters.

So a task is never launched twice, nor after its stop. The markers outlive the server: a
runtime made on the state root (`resume`, at construction) has every marked task wait again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuyard.model import TaskReason
from gpuyard.model.registries import RegistryLogin
from gpuyard.runtime.errors import ImageError, LaunchInvalid
from gpuyard.runtime.hostdirs import release_task_mounts
from gpuyard.runtime.images import WAIT_MARKER, ImageStore, normalize
from gpuyard.runtime.imagewarm import ImageWarmer, is_warm_key
from gpuyard.runtime.launchjson import launch_from_json
from gpuyard.runtime.pulls import PullPolicy, PullQueue, PullState
from gpuyard.runtime.taskdir import TaskDir, read_json, write_json
from gpuyard.runtime.types import TaskExit, TaskLaunch

log = logging.getLogger("gpuyard.runtime")

MARKER = WAIT_MARKER

Launch = Callable[[TaskDir, TaskLaunch], None]


def _marker(td: TaskDir) -> Path:
    return td.path / MARKER


def _state_json(state: PullState) -> dict[str, Any]:
    return {"image": state.image, "verb": state.verb, "attempt": state.attempt,
            "tries": state.tries, "lastError": state.last_error}


def read_state(td: TaskDir) -> PullState | None:
    """The pull the task waits for, or None if it waits for none."""
    value = read_json(_marker(td))
    if not isinstance(value, dict) or not isinstance(value.get("image"), str):
        return None
    return PullState(value["image"], str(value.get("verb") or "pulling"),
                     int(value.get("attempt") or 1), int(value.get("tries") or 1),
                     value.get("lastError"))


def end_reason(error: Exception) -> str:
    """The task reason of a launch that failed: as the controller reads a failed `start`."""
    if isinstance(error, ImageError):
        return TaskReason.IMAGE_ERROR
    if isinstance(error, (LaunchInvalid, ValueError)):
        return TaskReason.INVALID_SPEC
    return TaskReason.AGENT_ERROR


class WaitingTasks:
    """The tasks of one node waiting for their image, and the pulls they wait for."""

    def __init__(self, tasks_dir: Path, images: ImageStore, launch: Launch,
                 policy: PullPolicy | None = None) -> None:
        self.tasks_dir = tasks_dir
        self.images = images
        self._launch = launch
        self._lock = threading.Lock()  # one claim or marker update at a time
        self.pulls = PullQueue(
            images.resolve,
            policy or PullPolicy.from_env(),
            self._progress, self._ready, self._failed,
        )
        self.warmer = ImageWarmer(images, self.pulls)  # pulls asked ahead of tasks (imagewarm.py)

    def defer(self, td: TaskDir, launch: TaskLaunch, verb: str) -> None:
        """Task `td` (its dir claimed) waits for its image; the launch comes when it is here."""
        assert launch.image is not None
        image = normalize(launch.image)
        write_json(td.launch, dataclasses.asdict(launch))
        write_json(_marker(td), _state_json(PullState(image, verb, 1, self.pulls.policy.tries)))
        self.pulls.wait_for(image, td.key, launch.image_login)

    def detail(self, td: TaskDir) -> str | None:
        state = read_state(td)
        return state.detail() if state is not None else None

    def waits(self, td: TaskDir) -> bool:
        return _marker(td).exists()

    def cancel(self, td: TaskDir) -> bool:
        """A stop of a task that waits for its image: it ends `Cancelled` now. False if the
        task waits for nothing (its launch, if any, is under way or done)."""
        if not self._claim(td):
            return False
        self.pulls.forget(td.key)
        td.write_exit(TaskExit(None, TaskReason.CANCELLED, time.time(),
                               "stopped while waiting for its image", stop_requested=True))
        return True

    def resume(self) -> int:
        """Have every task with a marker (left by an earlier server) wait again; how many."""
        resumed = 0
        with contextlib.suppress(OSError):
            for entry in os.scandir(self.tasks_dir):
                td = TaskDir(Path(entry.path))
                state = read_state(td)
                if state is not None and not td.exit_file.exists():
                    self.pulls.wait_for(state.image, td.key, _login(td))
                    resumed += 1
        return resumed

    def close(self) -> None:
        self.pulls.close()

    # --- the pull queue's callbacks (its worker threads) -------------------------------------

    def _claim(self, td: TaskDir) -> bool:
        with self._lock:
            try:
                os.unlink(_marker(td))
            except FileNotFoundError:
                return False
        return True

    def _progress(self, key: str, state: PullState) -> None:
        if is_warm_key(key):  # a warm has no marker to update
            return
        td = TaskDir(self.tasks_dir / key)
        with self._lock:
            if _marker(td).exists():  # never re-creates a claimed marker
                write_json(_marker(td), _state_json(state))

    def _ready(self, key: str) -> None:
        if is_warm_key(key):
            self.warmer.done(key, None)
            return
        td = TaskDir(self.tasks_dir / key)
        if not self._claim(td):
            return
        try:
            launch = launch_from_json(read_json(td.launch))
        except ValueError as e:  # our own file, unreadable: the platform's failure
            _end(td, TaskReason.AGENT_ERROR, f"could not start the task: {e}")
            return
        try:
            self._launch(td, launch)
        except Exception as e:  # every way a start can fail, recorded as its end
            _end(td, end_reason(e), f"could not start the task: {e}")

    def _failed(self, key: str, message: str, transient: bool = False) -> None:
        if is_warm_key(key):
            self.warmer.done(key, message)
            return
        td = TaskDir(self.tasks_dir / key)
        if self._claim(td):
            reason = TaskReason.REGISTRY_UNAVAILABLE if transient else TaskReason.IMAGE_ERROR
            _end(td, reason, message)


def _login(td: TaskDir) -> RegistryLogin | None:
    """The registry login in the task's `launch.json` (None if it has none, or no launch)."""
    try:
        return launch_from_json(read_json(td.launch)).image_login
    except ValueError:
        return None


def _end(td: TaskDir, reason: str, message: str) -> None:
    """Record the end of a task that never ran: its mounts released, `exit.json` written."""
    with contextlib.suppress(OSError):
        release_task_mounts(td.path)
    td.path.mkdir(exist_ok=True)  # a failed spawn discards the dir: the end is still told
    td.write_exit(TaskExit(None, reason, time.time(), message))
    log.info("task %s ended %s before it started: %s", td.key, reason, message)


