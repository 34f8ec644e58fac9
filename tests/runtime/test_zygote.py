"""The node's zygote forks task supervisors: they are detached from it and the server, outlive
it, and inherit none of its signal settings; a dead zygote is replaced at the next start."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from gpuyard.model import TaskReason
from gpuyard.runtime.executor import ContainerRuntime
from gpuyard.runtime.taskdir import read_json

from .helpers import MakeLaunch, wait_exited, wait_for, wait_running

pytestmark = pytest.mark.container
SIGCHLD_BIT = 1 << (signal.SIGCHLD - 1)


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def supervisor_pid(rt: ContainerRuntime, key: str) -> int:
    return int(read_json(rt.task_dir(key).pid_file)["pid"])


def signal_masks(status: str) -> dict[str, int]:
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    return {name: int(fields[name], 16) for name in ("SigBlk", "SigIgn")}


def test_a_supervisor_is_the_zygotes_child_and_outlives_it(
    runtime: ContainerRuntime, make_launch: MakeLaunch, tmp_path: Path
) -> None:
    launch = make_launch("while [ ! -f /data/go ]; do sleep 0.05; done; echo done > /output/done")
    runtime.start(launch)
    wait_running(runtime, launch.key)
    sup = supervisor_pid(runtime, launch.key)
    zygote = parent_of(sup)
    assert zygote != os.getpid()
    assert b"gpuyard.runtime.zygote" in Path(f"/proc/{zygote}/cmdline").read_bytes()
    assert os.getpgid(sup) == sup  # its own process group
    assert os.getsid(sup) == os.getsid(zygote) != os.getsid(0)  # the zygote's session, not ours
    os.kill(zygote, signal.SIGKILL)
    wait_for("the supervisor to be reparented", lambda: parent_of(sup) != zygote)
    (tmp_path / "data" / "go").touch()
    exit_ = wait_exited(runtime, launch.key)
    assert exit_.reason == TaskReason.COMPLETED, exit_.message
    assert (tmp_path / "output" / "done").read_text() == "done\n"

    again = make_launch("sleep 30")  # the dead zygote is replaced by a new one
    runtime.start(again)
    wait_running(runtime, again.key)
    new_zygote = parent_of(supervisor_pid(runtime, again.key))
    assert new_zygote != zygote
    assert b"gpuyard.runtime.zygote" in Path(f"/proc/{new_zygote}/cmdline").read_bytes()
    runtime.stop(again.key, grace_s=0)
    assert wait_exited(runtime, again.key).stop_requested


def children_of(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if parent_of(int(entry.name)) == pid:
                    found.add(int(entry.name))
            except (OSError, IndexError):
                pass
    return found


def test_a_killed_spare_is_replaced_and_the_start_still_works(
    runtime: ContainerRuntime, make_launch: MakeLaunch
) -> None:
    first = make_launch("sleep 30")
    runtime.start(first)
    sup = supervisor_pid(runtime, first.key)
    zygote = parent_of(sup)
    spares = wait_for("a spare", lambda: children_of(zygote) - {sup})
    for spare in spares:
        os.kill(spare, signal.SIGKILL)
    second = make_launch("echo second")
    runtime.start(second)
    assert supervisor_pid(runtime, second.key) not in spares
    exit_ = wait_exited(runtime, second.key)
    assert exit_.reason == TaskReason.COMPLETED and runtime.read_log(second.key) == b"second\n"
    runtime.stop(first.key, grace_s=0)
    assert wait_exited(runtime, first.key).stop_requested


def test_supervisors_and_tasks_inherit_no_blocked_or_ignored_signals(
    runtime: ContainerRuntime, make_launch: MakeLaunch, tmp_path: Path
) -> None:
    launch = make_launch("cat /proc/self/status > /output/status; sleep 30")
    runtime.start(launch)
    wait_for("the task's status", lambda: "SigBlk" in _read(tmp_path / "output" / "status"))
    sup = supervisor_pid(runtime, launch.key)
    for status in (Path(f"/proc/{sup}/status").read_text(), _read(tmp_path / "output" / "status")):
        masks = signal_masks(status)
        assert masks["SigBlk"] == 0, status
        assert not masks["SigIgn"] & SIGCHLD_BIT, status
    runtime.stop(launch.key, grace_s=0)
    assert wait_exited(runtime, launch.key).stop_requested


def test_without_a_zygote_supervisors_are_exec_ed(
    runtime: ContainerRuntime, make_launch: MakeLaunch
) -> None:
    launch = make_launch("echo hi")
    td = runtime.task_dir(launch.key)
    td.path.mkdir()
    runtime._write_task(td, launch)
    code = runtime._spawn_by_exec(td)
    assert code == 0 and td.supervisor() is not None
    assert parent_of(td.supervisor()[0]) != os.getpid()
    exit_ = wait_exited(runtime, launch.key)
    assert exit_.reason == TaskReason.COMPLETED and runtime.read_log(launch.key) == b"hi\n"


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
