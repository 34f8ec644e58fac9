"""The task's life around the container: stop with grace, a detached supervisor, failures,
adoption (keys), removal, and picking crun or runc."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gpuyard.model import TaskReason
from gpuyard.runtime.errors import RuntimeStartError, RuntimeUnavailable, TaskStillRunning
from gpuyard.runtime.executor import ContainerRuntime
from gpuyard.runtime.taskdir import read_json, write_json
from gpuyard.runtime.types import TaskPhase

from .helpers import MakeLaunch, run_task, wait_exited, wait_for, wait_running

pytestmark = pytest.mark.container

TRAPS_TERM = (
    "trap 'echo graceful > /output/term; exit 0' TERM; echo ready; "
    "while :; do sleep 0.05; done"
)
IGNORES_TERM = "trap '' TERM; echo ready; while :; do sleep 0.05; done"


def test_stop_lets_a_task_that_traps_term_finish(
    runtime: ContainerRuntime, make_launch: MakeLaunch, tmp_path: Path
) -> None:
    launch = make_launch(TRAPS_TERM)
    runtime.start(launch)
    wait_running(runtime, launch.key)
    wait_for("ready", lambda: runtime.read_log(launch.key) == b"ready\n")
    asked = time.monotonic()
    runtime.stop(launch.key, grace_s=10)
    exit_ = wait_exited(runtime, launch.key)
    assert time.monotonic() - asked < 5
    assert (tmp_path / "output" / "term").read_text() == "graceful\n"
    assert exit_.reason == TaskReason.COMPLETED and exit_.stop_requested


def test_stop_kills_a_task_that_ignores_term_after_the_grace(
    runtime: ContainerRuntime, make_launch: MakeLaunch
) -> None:
    launch = make_launch(IGNORES_TERM)
    runtime.start(launch)
    wait_for("ready", lambda: runtime.read_log(launch.key) == b"ready\n")
    asked = time.monotonic()
    runtime.stop(launch.key, grace_s=1)
    exit_ = wait_exited(runtime, launch.key)
    assert 1 <= time.monotonic() - asked < 6
    assert (exit_.exit_code, exit_.reason) == (137, "Signal(SIGKILL)")
    assert exit_.stop_requested and "SIGKILL" in exit_.message
    runtime.stop(launch.key, grace_s=1)  # already exited: a no-op
    runtime.stop("no-such-task", grace_s=1)


STARTER = """
import sys, time
from pathlib import Path
from gpuyard.runtime.executor import ContainerRuntime
from gpuyard.runtime.types import TaskLaunch
args = {args}
rt = ContainerRuntime(Path(args.pop("state_root")), args.pop("runtime"))
rt.start(TaskLaunch(**args))
print("started", flush=True)
time.sleep(60)
"""


def test_supervisor_outlives_the_process_that_started_it(
    runtime: ContainerRuntime, make_launch: MakeLaunch, tmp_path: Path
) -> None:
    launch = make_launch("while [ ! -f /data/go ]; do sleep 0.05; done; echo done > /output/done")
    args = {"state_root": str(runtime.state_root), "runtime": runtime.name,
            **{f: getattr(launch, f) for f in ("key", "job_id", "job_name", "role", "index",
                                               "attempt", "command", "cpu", "memory_mb",
                                               "data_dir", "output_dir", "storage_roots")}}
    starter = subprocess.Popen([sys.executable, "-c", STARTER.format(args=repr(args))],
                               stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert starter.stdout is not None
        assert starter.stdout.readline() == b"started\n"
        wait_running(runtime, launch.key)
    finally:
        os.killpg(starter.pid, signal.SIGKILL)  # the "server" and its whole process group
        starter.wait(timeout=10)
    sup = read_json(runtime.task_dir(launch.key).pid_file)
    assert os.getsid(sup["pid"]) not in (starter.pid, os.getsid(0))
    assert runtime.status(launch.key).phase == TaskPhase.RUNNING
    (tmp_path / "data" / "go").touch()
    exit_ = wait_exited(runtime, launch.key)
    assert exit_.reason == TaskReason.COMPLETED, exit_.message
    assert (tmp_path / "output" / "done").read_text() == "done\n"


def test_a_vanished_supervisor_is_an_agent_error_and_its_container_goes(
    runtime: ContainerRuntime, make_launch: MakeLaunch
) -> None:
    launch = make_launch("echo working; sleep 30")
    runtime.start(launch)
    wait_for("output", lambda: runtime.read_log(launch.key) == b"working\n")
    td = runtime.task_dir(launch.key)
    container_pid = int(td.container_pid.read_text())
    os.kill(read_json(td.pid_file)["pid"], signal.SIGKILL)
    exit_ = wait_exited(runtime, launch.key)
    assert exit_.reason == TaskReason.AGENT_ERROR
    assert "supervisor" in exit_.message and "working" in exit_.message
    wait_for("the orphaned container to be gone", lambda: not Path(f"/proc/{container_pid}")
             .exists() or Path(f"/proc/{container_pid}/stat").read_text().split()[2] == "Z")


def _start_with_broken_config(rt: ContainerRuntime, make_launch: MakeLaunch, change: str) -> str:
    """Start a task whose config.json is edited before the supervisor runs it."""
    launch = make_launch("true")
    td = rt.task_dir(launch.key)
    td.path.mkdir()
    rt._write_task(td, launch)
    config = json.loads(td.config.read_text())
    if change == "mount":
        config["mounts"].append({"type": "bind", "source": "/nonexistent/gpuyard",
                                 "destination": "/data2", "options": ["rbind", "ro"]})
    else:
        config["process"]["args"] = ["/nonexistent/gpuyard-binary"]
    write_json(td.config, config)
    rt._spawn(td)
    return launch.key


def test_a_container_that_cannot_be_created_is_an_agent_error(
    runtime: ContainerRuntime, make_launch: MakeLaunch
) -> None:
    key = _start_with_broken_config(runtime, make_launch, "mount")
    exit_ = wait_exited(runtime, key)
    assert (exit_.exit_code, exit_.reason) == (None, TaskReason.AGENT_ERROR)
    assert "/nonexistent/gpuyard" in exit_.message and runtime.name in exit_.message
    assert runtime.status(key).started_at is None


def test_a_missing_executable_is_command_not_found(
    runtime: ContainerRuntime, make_launch: MakeLaunch
) -> None:
    key = _start_with_broken_config(runtime, make_launch, "args")
    exit_ = wait_exited(runtime, key)
    assert exit_.reason == TaskReason.COMMAND_NOT_FOUND, exit_.message


def test_keys_status_and_remove(runtime: ContainerRuntime, make_launch: MakeLaunch) -> None:
    done, running = make_launch("echo bye; exit 0"), make_launch("sleep 30")
    run_task(runtime, done)
    runtime.start(running)
    assert runtime.status(running.key).phase in (TaskPhase.STARTING, TaskPhase.RUNNING)
    assert runtime.keys() == sorted([done.key, running.key])
    with pytest.raises(TaskStillRunning):
        runtime.remove(running.key)
    runtime.stop(running.key, grace_s=0)
    assert wait_exited(runtime, running.key).stop_requested
    for key in (done.key, running.key):
        runtime.remove(key)
        assert runtime.status(key).phase == TaskPhase.UNKNOWN
    assert runtime.keys() == []
    assert runtime.read_log(done.key) == b"bye\n" and runtime.tail_log(done.key, 3) == "bye"
    runtime.remove(done.key)  # gone already: a no-op
    assert runtime.prune_logs(older_than_s=3600) == 0
    assert runtime.prune_logs(older_than_s=-1) == 2
    assert runtime.read_log(done.key) == b"" and runtime.tail_log(done.key, 3) == ""


def test_start_refuses_what_it_cannot_run(
    runtime: ContainerRuntime, make_launch: MakeLaunch, tmp_path: Path
) -> None:
    launch = make_launch("true")
    run_task(runtime, launch)
    with pytest.raises(RuntimeStartError, match="already exists"):
        runtime.start(launch)
    with pytest.raises(RuntimeStartError, match="not on this node"):
        runtime.start(make_launch("true", image="ubuntu:22.04"))
    with pytest.raises(RuntimeStartError, match="does not exist"):
        runtime.start(make_launch("true", data_dir=str(tmp_path / "missing")))
    with pytest.raises(RuntimeStartError, match="bad task key"):
        runtime.start(make_launch("true", key="../escape"))
    with pytest.raises(RuntimeStartError, match="bad env name"):
        runtime.start(make_launch("true", env=(("A=B", "x"),)))
    assert runtime.keys() == [launch.key]


def test_runtime_is_picked_from_the_argument_the_env_or_a_probe(
    container_host: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GPUYARD_OCI_RUNTIME", raising=False)
    assert ContainerRuntime(tmp_path / "a").name == "crun"  # crun works on this host
    monkeypatch.setenv("GPUYARD_OCI_RUNTIME", "runc")
    assert ContainerRuntime(tmp_path / "b").name == "runc"
    assert ContainerRuntime(tmp_path / "c", runtime="crun").name == "crun"
    with pytest.raises(RuntimeUnavailable, match="expected crun or runc"):
        ContainerRuntime(tmp_path / "d", runtime="docker")


def test_stop_right_after_start_ends_the_task(
    runtime: ContainerRuntime, make_launch: MakeLaunch
) -> None:
    launch = make_launch("sleep 30")
    runtime.start(launch)
    runtime.stop(launch.key, grace_s=0)
    exit_ = wait_exited(runtime, launch.key, timeout=10)
    assert exit_.stop_requested
    assert exit_.reason in (TaskReason.CANCELLED, "Signal(SIGKILL)"), exit_


def test_tasks_start_concurrently(runtime: ContainerRuntime, make_launch: MakeLaunch,
                                  tmp_path: Path) -> None:
    launches = [make_launch(f"echo {i} > /output/{i}", index=i) for i in range(6)]
    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(runtime.start, launches))
    for launch in launches:
        assert wait_exited(runtime, launch.key).reason == TaskReason.COMPLETED
    assert sorted(p.name for p in (tmp_path / "output").iterdir()) == [str(i) for i in range(6)]


def test_crun_starts_the_container_in_process_runc_by_its_start(
    runtime: ContainerRuntime, make_launch: MakeLaunch, tmp_path: Path
) -> None:
    """crun's created container is released through its exec fifo, with no second crun
    process; runc's by `runc start`. Either way the task runs and its exit is recorded."""
    launch = make_launch("echo started > /output/marker; exit 3")
    exit_ = run_task(runtime, launch)
    assert (exit_.reason, exit_.exit_code) == (TaskReason.error(3), 3), exit_
    assert (tmp_path / "output" / "marker").read_text() == "started\n"
    td = runtime.task_dir(launch.key)
    in_process = runtime.name == "crun"
    assert read_json(td.task)["startInProcess"] is in_process
    how = "through its exec fifo" if in_process else "by runc start"
    assert f"started {how}" in td.supervisor_log.read_text()
