"""Start and exit hints reach the node's listener; without a listener nothing breaks."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from gpuyard.runtime.notify import NotifyListener, notify


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
