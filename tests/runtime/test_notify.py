"""Start and exit hints reach the node's listener; without a listener nothing breaks; the socket
is a file in a 0700 dir, another uid's datagrams are dropped, and a burst is one wake-up."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gpuyard.runtime.notify import FALLBACK_DIR, STATS, NotifyListener, notify, socket_path


def test_a_hint_reaches_the_listener_of_its_state_root(tmp_path: Path):
    got: list[tuple[str, str]] = []
    arrived = threading.Event()

    def on_hint(event: str, key: str) -> None:
        got.append((event, key))
        arrived.set()

    listener = NotifyListener(tmp_path / "a", on_hint)
    try:
        notify(tmp_path / "b", "other-root", "exited")  # another node's root: not ours
        notify(tmp_path / "a", "job-1", "exited")
        assert arrived.wait(5)
        assert got == [("exited", "job-1")]
    finally:
        listener.close()


def test_notify_without_listener_is_harmless(tmp_path: Path):
    notify(tmp_path / "nobody" / ("x" * 200), "job-1", "started")


def test_a_second_listener_on_the_same_root_is_refused(tmp_path: Path):
    first = NotifyListener(tmp_path, lambda e, k: None)
    try:
        with pytest.raises(OSError):
            NotifyListener(tmp_path, lambda e, k: None)
    finally:
        first.close()


HOSTILE = Path(__file__).parents[1] / "security" / "hostile.py"
NOBODY = 65534


def run_hostile(*args: str) -> dict:
    out = subprocess.run(
        [sys.executable, str(HOSTILE), *args], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


def wait_for(predicate, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def test_the_socket_is_a_file_in_a_dir_only_its_owner_may_enter(tmp_path: Path):
    listener = NotifyListener(tmp_path, lambda e, k: None)
    try:
        path = socket_path(tmp_path)
        assert path == tmp_path.resolve() / "run" / "notify.sock"
        assert stat.S_ISSOCK(os.lstat(path).st_mode)
        assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    finally:
        listener.close()
    assert not path.exists()


def test_a_state_root_too_long_for_a_socket_path_gets_a_short_one(tmp_path: Path):
    root = tmp_path / ("x" * 120)
    path = socket_path(root)
    assert path.parent == FALLBACK_DIR and len(str(path)) < 108
    assert socket_path(tmp_path / ("y" * 120)) != path


def test_a_stale_socket_file_is_swept(tmp_path: Path):
    path = socket_path(tmp_path)
    path.parent.mkdir(mode=0o700)
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as dead:
        dead.bind(str(path))  # closed without unlinking: a server killed with -9
    got: list[tuple[str, str]] = []
    listener = NotifyListener(tmp_path, lambda e, k: got.append((e, k)))
    try:
        notify(tmp_path, "job-1", "started")
        assert wait_for(lambda: got == [("started", "job-1")])
    finally:
        listener.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to another uid needs root")
def test_datagrams_from_another_uid_are_rejected(tmp_path: Path):
    got: list[tuple[str, str]] = []
    listener = NotifyListener(tmp_path, lambda e, k: got.append((e, k)))
    rejected = STATS.rejected
    try:
        result = run_hostile("flood", str(socket_path(tmp_path)), "50", str(NOBODY))
        assert result["connected"] and result["sent"] > 0
        assert wait_for(lambda: STATS.rejected - rejected >= result["sent"])
        notify(tmp_path, "job-1", "started")  # the server's own uid still gets through
        assert wait_for(lambda: got == [("started", "job-1")])
    finally:
        listener.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to another uid needs root")
def test_a_task_uid_cannot_reach_the_socket(tmp_path: Path):
    listener = NotifyListener(tmp_path, lambda e, k: None)
    try:
        result = run_hostile("reach", str(socket_path(tmp_path)), str(NOBODY))
        assert result == {"sent": False, "error": "Permission denied"}
    finally:
        listener.close()


def test_a_burst_wakes_the_watcher_once(tmp_path: Path):
    calls: list[tuple[str, str]] = []
    first_in, release = threading.Event(), threading.Event()

    def on_hint(event: str, key: str) -> None:
        calls.append((event, key))
        first_in.set()
        release.wait(10)

    listener = NotifyListener(tmp_path, on_hint)
    accepted = STATS.accepted
    try:
        notify(tmp_path, "job-0", "started")
        assert first_in.wait(5)  # the watcher is busy with the first hint
        for i in range(1, 200):
            notify(tmp_path, f"job-{i}", "exited")  # queued (or dropped when the queue is full)
        queued = STATS.accepted
        release.set()
        assert wait_for(lambda: len(calls) == 2)
        assert STATS.accepted > queued > accepted
        assert calls[1][0] == "exited"
    finally:
        release.set()
        listener.close()
