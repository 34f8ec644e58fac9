"""`gpuyard run` against the real server and real containers (docs/interactive.md): the
command's exit code is gpuyard's, stdout is the command's alone, stdin is forwarded (a
terminal when stdin is one), and the job ends with the session — also when the client is
killed -9, while its command runs or while its job waits for a GPU."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from e2e.conftest import FAKE_GPUS, Server
from tasknetworks import nodes_under, random_subnets, remove_node_network

pytestmark = [pytest.mark.e2e, pytest.mark.container]

MORE_GPUS_THAN_THE_NODE = str(int(FAKE_GPUS.split("x")[0]) + 1)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    base = tmp_path_factory.mktemp("run")
    subnet, network = random_subnets()  # as tests/conftest.py's task_subnets, for the module
    with pytest.MonkeyPatch.context() as env:
        env.setenv("GPUYARD_TASK_SUBNET", subnet)
        env.setenv("GPUYARD_TASK_NETWORK", network)
        srv = Server(base / "data", base / "server.log")
        srv.start()
    try:
        yield srv
    finally:
        srv.stop()
        for tag in nodes_under(base):
            remove_node_network(tag)


def gpuyard(server: Server, *args: str, **kw) -> subprocess.Popen[bytes]:
    env = {**os.environ, "GPUYARD_URL": server.url, "GPUYARD_TOKEN": server.token}
    return subprocess.Popen([sys.executable, "-m", "gpuyard", *args], env=env, **kw)


def job_named(server: Server, name: str, timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        jobs = server.http.get("/api/v1/jobs", params={"name": name}).json()["jobs"]
        if jobs:
            return jobs[0]
        time.sleep(0.2)
    raise AssertionError(f"no job named {name} after {timeout}s")


def reasons(server: Server, job_id: str) -> list[str]:
    events = server.http.get(f"/api/v1/jobs/{job_id}/events").json()["events"]
    return [e["reason"] for e in events]


def wait_for_event(server: Server, job_id: str, reason: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while reason not in reasons(server, job_id):
        assert time.monotonic() < deadline, f"no {reason} event on {job_id}"
        time.sleep(0.2)


def test_run_returns_the_commands_exit_code_and_the_job_fails_with_it(server):
    proc = gpuyard(server, "run", "--name", "exit3", "--", "sh", "-c", "exit 3",
                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 3, err
    assert out == b""  # nothing of gpuyard's own on stdout
    job = server.wait(job_named(server, "exit3")["id"], timeout=30)
    events = server.http.get(f"/api/v1/jobs/{job['id']}/events").json()["events"]
    assert (job["state"], job["reason"]) == ("FAILED", "SessionEnded(exit 3)"), events
    assert {"Exec", "SessionEnded"} <= set(reasons(server, job["id"]))


def test_run_forwards_stdin_and_succeeds_with_exit_0(server):
    proc = gpuyard(server, "run", "--name", "echo", "--", "sh", "-c", "read x; echo got-$x",
                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate(b"hello\n", timeout=90)
    assert proc.returncode == 0, err
    assert out == b"got-hello\n"
    job = server.wait(job_named(server, "echo")["id"], timeout=30)
    events = server.http.get(f"/api/v1/jobs/{job['id']}/events").json()["events"]
    assert (job["state"], job["reason"]) == ("SUCCEEDED", "SessionEnded(exit 0)"), events


def test_run_on_a_terminal_gives_the_command_a_terminal(server):
    main, child = pty.openpty()
    proc = gpuyard(server, "run", "--name", "tty", "--", "sh", "-c", "test -t 0 && exit 7",
                   stdin=child, stdout=child, stderr=child)
    os.close(child)
    seen = b""
    deadline = time.monotonic() + 90
    while proc.poll() is None and time.monotonic() < deadline:
        if select.select([main], [], [], 0.2)[0]:
            try:
                seen += os.read(main, 4096)
            except OSError:
                break
    assert proc.wait(10) == 7, seen
    os.close(main)


def test_a_client_killed_while_its_command_runs_ends_the_job(server):
    proc = gpuyard(server, "run", "--name", "killed", "--", "sleep", "600",
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    try:
        job_id = job_named(server, "killed")["id"]
        wait_for_event(server, job_id, "Exec")  # the session is open: the command runs
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    job = server.wait(job_id, timeout=30)
    assert (job["state"], job["reason"]) == ("STOPPED", "SessionLost"), job
    assert "SessionLost" in reasons(server, job_id)


def test_a_client_killed_while_its_job_waits_for_a_gpu_ends_the_job(server):
    proc = gpuyard(server, "run", "--gpus", MORE_GPUS_THAN_THE_NODE, "--name", "waiting",
                   "--", "true", stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE)
    assert proc.stderr is not None
    try:
        ready, _, _ = select.select([proc.stderr], [], [], 60)
        assert ready, "no progress on stderr"
        line = proc.stderr.readline().decode()
        assert line.startswith("gpuyard run: job ") and "waiting for a GPU: " in line, line
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    job = server.wait(job_named(server, "waiting")["id"], timeout=30)
    assert (job["state"], job["reason"]) == ("STOPPED", "SessionLost"), job
