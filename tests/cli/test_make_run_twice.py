"""A second `make run` while one runs (issue 17, item 6): `make port-free`, its first step,
says who holds the port and stops before installing or starting anything."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make")


def port_free(port: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["make", "-s", "-C", str(ROOT), "port-free", f"PORT={port}"],
                          capture_output=True, text=True, timeout=60, check=False)


def test_a_held_port_names_its_holder() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        done = port_free(port)
    assert done.returncode != 0
    assert f"127.0.0.1:{port} is already in use" in done.stderr
    if shutil.which("ss"):
        assert f"by pid {os.getpid()}" in done.stderr
    assert "make run PORT=" in done.stderr


def test_a_free_port_passes_silently() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = port_free(port)
    assert done.returncode == 0 and done.stderr == ""
