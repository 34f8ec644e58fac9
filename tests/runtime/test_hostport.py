"""The server's port: bound and listening, or a message naming who holds it."""

from __future__ import annotations

import os
import socket

import pytest

from gpuyard.runtime.hostport import PortHeld, listen_socket, port_holders, task_of


def test_a_held_port_names_its_holder():
    with listen_socket("127.0.0.1", 0) as held:
        port = held.getsockname()[1]
        assert [h.pid for h in port_holders(port)] == [os.getpid()]
        with pytest.raises(PortHeld, match=rf"in use by pid {os.getpid()} \(.+\), not a gpuyard"):
            listen_socket("127.0.0.1", port)


def test_a_socket_that_only_binds_is_no_holder_but_still_refused_once_we_listen():
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        port = other.getsockname()[1]
        assert port_holders(port) == []  # bound, not listening
        with pytest.raises(PortHeld, match="a process this server cannot see"):
            listen_socket("127.0.0.1", port)


def test_a_task_is_known_by_its_cgroup(tmp_path):
    (tmp_path / "cgroup").write_text("0::/gpuyard/abc123-a1-main-0\n")
    assert task_of(tmp_path) == "abc123-a1-main-0"
    (tmp_path / "cgroup").write_text("0::/user.slice/session-1.scope\n")
    assert task_of(tmp_path) is None
