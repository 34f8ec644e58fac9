"""`gpuyard exec` and `gpuyard port-forward` against the real server and a real container:
one server and one running job (a Python HTTP server in its task) for the module."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from e2e.conftest import Server, fetch_when_served, free_port
from tasknetworks import nodes_under, random_subnets, remove_node_network

pytestmark = [pytest.mark.e2e, pytest.mark.container]

SPEC = """name: web
taskRoles:
  main:
    cpuNumber: 0.5
    memoryMB: 256
    command: cd /workspace && echo served-from-the-task > index.html && exec python3 -m http.server 8000
"""


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    base = tmp_path_factory.mktemp("exec")
    subnet, network = random_subnets()  # as tests/conftest.py's task_subnets, for the module
    with pytest.MonkeyPatch.context() as env:
        env.setenv("GPUYARD_TASK_SUBNET", subnet)
        env.setenv("GPUYARD_TASK_NETWORK", network)
        server = Server(base / "data", base / "server.log")
        server.start()
    try:
        job_id = server.submit(SPEC)
        server.wait(job_id, {"RUNNING"})
        yield server, job_id
    finally:
        server.stop()
        for tag in nodes_under(base):
            remove_node_network(tag)


def gpuyard(server: Server, *args: str, **kw) -> subprocess.Popen[bytes]:
    env = {**os.environ, "GPUYARD_URL": server.url, "GPUYARD_TOKEN": server.token}
    return subprocess.Popen([sys.executable, "-m", "gpuyard", *args], env=env, **kw)


def test_exec_returns_the_commands_exit_code_and_keeps_stderr_apart(running):
    server, job_id = running
    proc = gpuyard(
        server, "exec", job_id, "--", "sh", "-c", "id -u; echo oops >&2; exit 3",
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 3, err
    assert out.decode().strip() == str(2**30)  # the default tenant's uid, not root
    assert err.decode().strip() == "oops"


def test_exec_without_i_gives_the_command_an_ended_input(running):
    """As docker exec without -i: a command that reads its input ends instead of waiting,
    even while this side's stdin stays open."""
    server, job_id = running
    proc = gpuyard(server, "exec", job_id, "--", "sh", "-c", "cat; echo read-all",
                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        code = proc.wait(timeout=30)  # its stdin (a pipe nobody writes to) open all along
    finally:
        proc.kill()
    assert proc.stdout is not None and proc.stderr is not None and proc.stdin is not None
    assert code == 0, proc.stderr.read()
    assert proc.stdout.read().decode().strip() == "read-all"
    proc.stdin.close()


def test_exec_it_runs_a_shell_on_a_terminal_and_returns_its_exit_code(running):
    server, job_id = running
    main, child = pty.openpty()
    proc = gpuyard(server, "exec", job_id, "-it", "--", "sh", stdin=child, stdout=child,
                   stderr=child)
    os.close(child)
    os.write(main, b"test -t 0 && echo on-a-tty-$((6*7)); exit 5\n")
    seen = b""
    deadline = time.monotonic() + 30
    while proc.poll() is None and time.monotonic() < deadline:
        if select.select([main], [], [], 0.2)[0]:
            try:
                seen += os.read(main, 4096)
            except OSError:
                break
    assert proc.wait(10) == 5, seen
    assert b"on-a-tty-42" in seen
    os.close(main)
    events = server.http.get(f"/api/v1/jobs/{job_id}/events").json()["events"]
    execs = [e["message"] for e in events if e["reason"] == "Exec"]
    assert "admin ran in main/0 with a terminal: sh" in execs


def test_port_forward_reaches_the_http_server_inside_the_task(running):
    server, job_id = running
    port = free_port()
    proc = gpuyard(server, "port-forward", job_id, f"{port}:8000", stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        assert b"Forwarding" in proc.stdout.readline()
        for _ in range(2):  # two connections, one tunnel each
            served = fetch_when_served(f"http://127.0.0.1:{port}/")
            assert served.strip() == b"served-from-the-task"
    finally:
        proc.terminate()
        proc.wait(10)
    events = server.http.get(f"/api/v1/jobs/{job_id}/events").json()["events"]
    forwards = [e["message"] for e in events if e["reason"] == "PortForward"]
    assert forwards == ["admin connected to port 8000 of main/0"]  # one run, one event


def test_exec_of_a_missing_task_or_a_closed_port_says_why(running):
    server, job_id = running
    proc = gpuyard(server, "exec", job_id, "--task", "main/3", "--", "true",
                   stderr=subprocess.PIPE)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 1 and b"has no task main/3" in err
