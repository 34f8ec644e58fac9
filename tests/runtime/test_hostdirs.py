"""Pinned host dirs: what a task's /data and /output come from, and that no pin can cost a
user their data (a recursive delete of the state dir once emptied this checkout through a
dataDir pin left mounted)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from gpuyard.model import TaskReason
from gpuyard.runtime.executor import ContainerRuntime
from gpuyard.runtime.hostdirs import HostDir, bind_fd, pin, release_pins
from gpuyard.runtime.overlay import mounted_under
from gpuyard.runtime.types import TaskLaunch

from .helpers import run_task, wait_running


def test_a_recursive_delete_through_a_pin_removes_nothing(tmp_path: Path, make_launch) -> None:
    data = tmp_path / "data"
    (data / "keep").write_text("precious")
    launch: TaskLaunch = make_launch("true")
    target = tmp_path / "state" / "mnt" / "data"
    target.mkdir(parents=True)
    fd = pin(HostDir("dataDir", str(data), False, "data"), launch, tmp_path / "state")
    try:
        bind_fd(fd, target)
    finally:
        os.close(fd)
    try:
        assert (target / "keep").read_text() == "precious"
        shutil.rmtree(tmp_path / "state", ignore_errors=True)  # what pytest's clean-up does
        assert (data / "keep").read_text() == "precious"
    finally:
        release_pins(tmp_path / "state")
    assert not mounted_under(tmp_path / "state")


def test_pins_are_gone_from_the_host_once_the_container_runs(
    runtime: ContainerRuntime, make_launch, tmp_path: Path
) -> None:
    launch = make_launch("echo hi > /output/o; while [ ! -e /data/go ]; do sleep 0.05; done")
    runtime.start(launch)
    wait_running(runtime, launch.key)
    assert not mounted_under(runtime.task_dir(launch.key).path)  # the container has its own
    (tmp_path / "data" / "go").touch()  # /data still shows the host dir live
    exit_ = run_task(runtime, make_launch("cat /output/o"))
    assert exit_.reason == TaskReason.COMPLETED
    assert (tmp_path / "output" / "o").read_text() == "hi\n"
