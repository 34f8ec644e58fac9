"""Real containers through crun and runc: isolation, limits, exit reasons.

Every test runs once per OCI runtime (the `runtime` fixture), and every wait has a deadline.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pytest

from gpuyard.model import GpuDevice, TaskReason
from gpuyard.runtime.cgroups import controller_dir, is_v2, pids_current, pids_max
from gpuyard.runtime.executor import ContainerRuntime

from .helpers import MakeLaunch, run_task, wait_for, wait_running

pytestmark = pytest.mark.container

GPUS = (
    GpuDevice(2, "GPU-fake-n1-2", "A100-80GB", 81920, fake=True),
    GpuDevice(5, "GPU-fake-n1-5", "A100-80GB", 81920, fake=True),
)


def read_env(path: Path) -> dict[str, str]:
    lines = path.read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def cgroup_limits(cgroup: str) -> tuple[int, int]:
    """(memory limit in bytes, CPU quota in µs per 100 ms period) of a cgroup, v1 or v2."""
    memory, cpu = controller_dir("memory", cgroup), controller_dir("cpu", cgroup)
    assert memory is not None and cpu is not None
    if is_v2():
        quota = (cpu / "cpu.max").read_text().split()[0]
        return int((memory / "memory.max").read_text()), int(quota)
    limit = int((memory / "memory.limit_in_bytes").read_text())
    return limit, int((cpu / "cpu.cfs_quota_us").read_text())


def test_task_sees_only_its_gpus_and_platform_env(
    runtime: ContainerRuntime, make_launch: MakeLaunch, tmp_path: Path
) -> None:
    launch = make_launch(
        "env > /output/env", gpus=GPUS, role="trainer", index=1,
        env=(("NVIDIA_VISIBLE_DEVICES", "all"), ("MY_VAR", "mine"), ("PATH", "/usr/bin:/bin")),
        role_task_counts=(("ps", 1), ("trainer", 2)),
    )
    exit_ = run_task(runtime, launch)
    assert exit_.reason == TaskReason.COMPLETED, exit_.message
    env = read_env(tmp_path / "output" / "env")
    assert env["NVIDIA_VISIBLE_DEVICES"] == "GPU-fake-n1-2,GPU-fake-n1-5"  # user cannot override
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert env["GPUYARD_GPU_UUIDS"] == "GPU-fake-n1-2,GPU-fake-n1-5"
    assert env["MY_VAR"] == "mine" and env["PATH"] == "/usr/bin:/bin"
    assert env["PAI_TASK_ROLE_LIST"] == "ps,trainer" and env["PAI_TASK_ROLE_COUNT"] == "2"
    assert env["PAI_TASK_ROLE_TASK_COUNT_trainer"] == "2"
    assert env["PAI_CURRENT_TASK_ROLE_NAME"] == "trainer" and env["PAI_TASK_INDEX"] == "1"
    assert env["GPUYARD_ATTEMPT"] == "1" and env["GPUYARD_JOB_ID"] == "job-1"


def test_task_without_gpu_sees_none(
    runtime: ContainerRuntime, make_launch: MakeLaunch, tmp_path: Path
) -> None:
    exit_ = run_task(runtime, make_launch("env > /output/env; hostname >> /output/env"))
    assert exit_.reason == TaskReason.COMPLETED, exit_.message
    text = (tmp_path / "output" / "env").read_text()
    env = read_env(tmp_path / "output" / "env")
    assert env["NVIDIA_VISIBLE_DEVICES"] == "void"
    assert env["CUDA_VISIBLE_DEVICES"] == ""
    assert text.splitlines()[-1] == "worker-0"  # its own uts namespace


def test_filesystem_isolation(
    runtime: ContainerRuntime, make_launch: MakeLaunch, tmp_path: Path
) -> None:
    (tmp_path / "data" / "input.txt").write_text("dataset\n")
    script = "; ".join([
        "cat /data/input.txt > /output/read",
        "touch /data/new 2>/dev/null && echo data-writable >> /output/result",
        "touch /usr/gpuyard-test 2>/dev/null && echo usr-writable >> /output/result",
        "touch /etc/gpuyard-test 2>/dev/null && echo etc-writable >> /output/result",
        "touch /gpuyard-test 2>/dev/null && echo root-writable >> /output/result",
        "echo scratch > /tmp/scratch && echo tmp-ok >> /output/result",
        "echo mine > note && pwd >> /output/result",
        "echo done >> /output/result",
    ])
    exit_ = run_task(runtime, make_launch(script))
    assert exit_.reason == TaskReason.COMPLETED, exit_.message
    assert (tmp_path / "output" / "read").read_text() == "dataset\n"
    assert (tmp_path / "output" / "result").read_text().split() == ["tmp-ok", "/workspace",
                                                                      "done"]
    assert not (tmp_path / "data" / "new").exists()
    assert not Path("/usr/gpuyard-test").exists() and not Path("/etc/gpuyard-test").exists()


def test_own_pid_namespace(
    runtime: ContainerRuntime, make_launch: MakeLaunch, tmp_path: Path
) -> None:
    script = "echo $$ > /output/pid; ls /proc | grep -E '^[0-9]+$' > /output/pids"
    exit_ = run_task(runtime, make_launch(script))
    assert exit_.reason == TaskReason.COMPLETED, exit_.message
    assert (tmp_path / "output" / "pid").read_text().strip() == "1"
    pids = [int(p) for p in (tmp_path / "output" / "pids").read_text().split()]
    assert 1 in pids and len(pids) < 10 and max(pids) < 100  # not the host's pids


def test_state_dir_is_hidden(container_host: None, make_launch: MakeLaunch,
                             tmp_path: Path) -> None:
    """A state root under a host dir that tasks see (/var here) is masked inside."""
    state = Path("/var/tmp") / f"gpuyard-test-{uuid.uuid4().hex[:8]}"
    try:
        rt = ContainerRuntime(state)
        script = (f"ls -A {state} > /output/ls; "
                  f"if touch {state}/x 2>/dev/null; then echo writable; fi > /output/w")
        exit_ = run_task(rt, make_launch(script))
        assert exit_.reason == TaskReason.COMPLETED, exit_.message
        assert (tmp_path / "output" / "ls").read_text() == ""
        assert (tmp_path / "output" / "w").read_text() == ""
    finally:
        shutil.rmtree(state, ignore_errors=True)


def test_exit_code_is_an_error_with_the_log(
    runtime: ContainerRuntime, make_launch: MakeLaunch
) -> None:
    exit_ = run_task(runtime, make_launch("echo preparing; echo 'bad input' >&2; exit 3"))
    assert (exit_.exit_code, exit_.reason) == (3, "Error(exit 3)")
    assert "preparing" in exit_.message and "bad input" in exit_.message
    assert not exit_.stop_requested


def test_command_not_found(runtime: ContainerRuntime, make_launch: MakeLaunch) -> None:
    exit_ = run_task(runtime, make_launch("no-such-command-gpuyard --version"))
    assert (exit_.exit_code, exit_.reason) == (127, TaskReason.COMMAND_NOT_FOUND)
    assert "no-such-command-gpuyard" in exit_.message


def test_killed_by_signal(runtime: ContainerRuntime, make_launch: MakeLaunch) -> None:
    exit_ = run_task(runtime, make_launch("sh -c 'kill -SEGV $$'"))
    assert (exit_.exit_code, exit_.reason) == (139, "Signal(SIGSEGV)")


def test_memory_hog_is_oom_killed(runtime: ContainerRuntime, make_launch: MakeLaunch) -> None:
    exit_ = run_task(runtime, make_launch("head -c 500M /dev/zero | tail", memory_mb=64))
    assert exit_.reason == TaskReason.OOM_KILLED, exit_
    assert "64 MB" in exit_.message


def test_fork_bomb_is_contained_by_the_pids_limit(
    runtime: ContainerRuntime, make_launch: MakeLaunch
) -> None:
    # one fork of the task's shell (before any bomb exists), then exec: its own exit never
    # depends on winning a fork against the bomb
    launch = make_launch("bomb() { bomb | bomb & }; bomb & exec sleep 2", pids_limit=40)
    runtime.start(launch)
    wait_running(runtime, launch.key)
    cgroup = f"/gpuyard/{launch.key}"
    assert pids_max(cgroup) == 40
    seen: list[int] = []

    def ended() -> bool:
        current = pids_current(cgroup)
        if current is not None:
            seen.append(current)
        return runtime.status(launch.key).exit is not None

    wait_for("the fork bomb's task to end", ended)
    exit_ = runtime.status(launch.key).exit
    assert exit_ is not None and exit_.reason == TaskReason.COMPLETED, exit_
    assert seen and max(seen) <= 40
    assert max(seen) >= 20  # it did try to grow
    assert os.system("true") == 0  # the host can still fork


def test_cgroup_limits_and_live_log(
    runtime: ContainerRuntime, make_launch: MakeLaunch, tmp_path: Path
) -> None:
    script = "echo first; while [ ! -f /data/go ]; do sleep 0.05; done; echo second"
    launch = make_launch(script, cpu=0.5, memory_mb=100, pids_limit=77)
    runtime.start(launch)
    status = wait_running(runtime, launch.key)
    assert status.started_at is not None
    wait_for("the first line", lambda: runtime.read_log(launch.key) == b"first\n")
    assert runtime.tail_log(launch.key, 5) == "first"
    cgroup = f"/gpuyard/{launch.key}"
    assert cgroup_limits(cgroup) == (100 * 1024 * 1024, 50_000)
    assert pids_max(cgroup) == 77
    (tmp_path / "data" / "go").touch()
    exit_ = wait_for("exit", lambda: runtime.status(launch.key).exit)
    assert exit_.reason == TaskReason.COMPLETED
    assert runtime.read_log(launch.key, offset=6) == b"second\n"
    assert runtime.read_log(launch.key, limit=3) == b"fir"
    assert runtime.tail_log(launch.key, 1) == "second"
    memory = controller_dir("memory", cgroup)
    assert memory is not None and not memory.exists()  # deleted with the container


def test_a_non_root_task_runs_as_its_user_without_capabilities(
    runtime: ContainerRuntime, make_launch: MakeLaunch, tmp_path: Path
) -> None:
    root = tmp_path / "nobody-root"  # a storage root of the task's user's own
    root.mkdir(mode=0o700)
    os.chown(root, 65534, 65534)
    out = root / "fresh-output"  # created by the runtime as the task's user
    script = (
        "id -u > /output/id; id -g >> /output/id; grep CapEff /proc/self/status >> /output/id; "
        "touch /workspace/mine && echo work-ok >> /output/id; "
        "chown root /output/id 2>/dev/null && echo chown-worked >> /output/id; true"
    )
    nobody = make_launch(
        script, data_dir=None, output_dir=str(out), run_as=(65534, 65534), storage_roots=(str(root),)
    )
    exit_ = run_task(runtime, nobody)
    assert out.stat().st_uid == 65534
    assert exit_.reason == TaskReason.COMPLETED, exit_.message
    lines = (out / "id").read_text().split("\n")
    assert lines[0] == "65534" and lines[1] == "65534"
    assert lines[2].split()[-1] == "0000000000000000"  # no effective capabilities
    assert "work-ok" in lines and "chown-worked" not in lines
