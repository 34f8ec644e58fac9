"""Bounded waits for the container runtime tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from gpuyard.runtime.executor import ContainerRuntime
from gpuyard.runtime.types import TaskExit, TaskLaunch, TaskPhase, TaskStatus

WAIT_S = 20.0

MakeLaunch = Callable[..., TaskLaunch]


def wait_for(what: str, check: Callable[[], Any], timeout: float = WAIT_S) -> Any:
    """Poll `check` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")


def wait_exited(rt: ContainerRuntime, key: str, timeout: float = WAIT_S) -> TaskExit:
    def exited() -> TaskExit | None:
        st = rt.status(key)
        return st.exit if st.phase == TaskPhase.EXITED else None

    return wait_for(f"task {key} to exit", exited, timeout)


def wait_running(rt: ContainerRuntime, key: str, timeout: float = WAIT_S) -> TaskStatus:
    def running() -> TaskStatus | None:
        st = rt.status(key)
        assert st.phase != TaskPhase.EXITED, f"task ended early: {st.exit}"
        return st if st.phase == TaskPhase.RUNNING else None

    return wait_for(f"task {key} to run", running, timeout)


def run_task(rt: ContainerRuntime, launch: TaskLaunch, timeout: float = WAIT_S) -> TaskExit:
    rt.start(launch)
    return wait_exited(rt, launch.key, timeout)
