"""A task cannot take the API port over across a server restart.

Tasks outlive the server. Before: tasks shared the host's network, and a task looping
`bind(127.0.0.1:API_PORT)` with SO_REUSEADDR won the port after a `kill -9` of the server; the
new server died with a bare "address already in use" and the task received the clients'
`Authorization: Bearer` headers. Now a task has a network namespace of its own (its 127.0.0.1
is not the host's: test_network.py), and only a `hostNetwork` job of a tenant a platform admin
allowed it can bind the host's ports; for those, the server binds before it adopts any task,
and a held port stops it with a message naming the holder and its task.
"""

from __future__ import annotations

import time

import pytest

from e2e.conftest import Server

pytestmark = [pytest.mark.e2e, pytest.mark.container]

SQUAT = """\
import socket, time
while True:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", {port}))
        s.listen(16)
        break
    except OSError:
        s.close()
        time.sleep(0.005)
print("bound", flush=True)
while True:
    c, _ = s.accept()
    print(c.recv(65536), flush=True)
    c.close()
"""


def squatter(port: int) -> str:
    code = SQUAT.format(port=port).encode().hex()
    return f"""\
name: squatter
hostNetwork: true
taskRoles:
  main:
    cpuNumber: 0.2
    memoryMB: 128
    command: "python3 -c 'exec(bytes.fromhex(\\"{code}\\"))'"
"""


def wait_for_text(path, text: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        time.sleep(0.1)
    raise AssertionError(f"no {text!r} in {path} after {timeout}s")


def test_a_task_holding_the_api_port_stops_the_server_with_its_name(make_server, tmp_path):
    first = make_server()
    r = first.http.patch("/api/v1/tenants/default", json={"allowHostNetwork": True})
    assert r.status_code == 200, r.text  # the only way a task gets at the host's ports
    job = first.submit(squatter(first.port))
    first.wait(job, {"RUNNING"})
    key = f"{job}-a1-main-0"
    task_log = first.data_dir / "node" / "tasks" / key / "log"
    first.kill9()
    wait_for_text(task_log, "bound")  # the task has the port now

    second = Server(first.data_dir, tmp_path / "second.log")
    second.port, second.url = first.port, first.url
    second.http.base_url = first.url
    try:
        with pytest.raises(RuntimeError, match="server exited"):
            second.start()
        assert second.proc is not None and second.proc.returncode != 0
        said = (tmp_path / "second.log").read_text()
        assert "the port is already in use by pid" in said, said
        assert f"the gpuyard task {key}" in said, said
        assert "Bearer" not in task_log.read_text(errors="replace")
    finally:
        cleanup = Server(first.data_dir, tmp_path / "cleanup.log")  # another port: adopt, cancel
        cleanup.start()
        cleanup.stop()
