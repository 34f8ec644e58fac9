"""run_exact: exit codes, output, timeouts (the child killed and reaped), and start errors."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gpuyard.runtime.procwait import run_exact, wait_pid_ready


@pytest.mark.parametrize("code", [0, 3, 255])
def test_the_exit_code_is_returned(code: int) -> None:
    done = run_exact(["sh", "-c", f"exit {code}"], stdout=None, stderr=None, timeout=10)
    assert done.returncode == code


def test_a_signal_is_a_negative_code_as_subprocess_reports_it() -> None:
    done = run_exact(["sh", "-c", "kill -KILL $$"], stdout=None, stderr=None, timeout=10)
    assert done.returncode == -9


def test_output_goes_to_the_given_fd(tmp_path) -> None:
    out = tmp_path / "out"
    fd = os.open(out, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        run_exact(["sh", "-c", "echo hi; echo err >&2"], stdout=fd, stderr=fd, timeout=10)
    finally:
        os.close(fd)
    assert out.read_text().split() == ["hi", "err"]


def test_a_command_past_its_timeout_is_killed_and_reaped() -> None:
    with pytest.raises(subprocess.TimeoutExpired) as caught:
        run_exact(["sleep", "30"], stdout=None, stderr=None, timeout=0.2)
    assert caught.value.cmd == ["sleep", "30"]
    assert "sleep" not in children_names()  # neither running nor a zombie


def children_names() -> list[str]:
    """`comm` of this process's children, zombies included."""
    names = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        comm, rest = text[text.index("(") + 1 : text.rindex(")")], text[text.rindex(")") + 2 :]
        if int(rest.split()[1]) == os.getpid():
            names.append(comm)
    return names


def test_a_missing_command_raises_oserror() -> None:
    with pytest.raises(OSError):
        run_exact(["/nonexistent/gpuyard-cmd"], stdout=None, stderr=None, timeout=1)


def test_wait_pid_ready_tells_running_from_ended() -> None:
    proc = subprocess.Popen(["sleep", "30"])
    try:
        assert not wait_pid_ready(proc.pid, 0.05)
        proc.kill()
        assert wait_pid_ready(proc.pid, 10)
        assert proc.wait() == -9  # left for the caller to reap
    finally:
        proc.kill()
        proc.wait()
