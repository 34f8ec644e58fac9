"""The notify channel (supervisors → server: "task K started/exited") is closed to tasks.

Before: a socket in the abstract namespace, which any process of the host's network
namespace could send to (a flood drove the controller: one cycle per datagram, server CPU
1.6 % → 72 %) or bind while the server was down. Now: `<state root>/run/notify.sock` in a
0700 dir, datagrams from any uid but root's dropped, floods coalesced (docs/runtime.md).
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest

from security.helpers import NOBODY, metric, run_hostile

pytestmark = [pytest.mark.e2e]

CYCLE_S = 0.5  # the server's cycle interval when nothing happens


def channel(server) -> Path:
    """Where docs/runtime.md says the socket is."""
    root = (server.data_dir / "node").resolve()
    path = root / "run" / "notify.sock"
    if len(str(path)) <= 107:
        return path
    return Path("/run/gpuyard/notify") / f"{hashlib.sha256(bytes(root)).hexdigest()[:24]}.sock"


def old_channel(server) -> str:
    """The abstract name the notify socket had before (a flooder's first guess)."""
    root = (server.data_dir / "node").resolve()
    return "@gpuyard-notify-" + hashlib.sha256(str(root).encode()).hexdigest()[:24]


def test_a_task_uid_reaches_no_notify_channel(server):
    for address in (str(channel(server)), old_channel(server)):
        result = run_hostile("reach", address, str(NOBODY))
        assert result["sent"] is False, f"a task's uid sent a hint to {address}"


def test_a_flood_does_not_drive_the_controller(server):
    """A task that got hold of the channel (connected before it dropped to its uid) floods
    it: the controller's cycles stay at their idle pace, every datagram is dropped."""
    target = str(channel(server)) if channel(server).exists() else old_channel(server)
    before = metric(server, "gpuyard_controller_cycle_seconds_count")
    began = time.monotonic()
    result = run_hostile("flood", target, "200000", str(NOBODY))
    elapsed = time.monotonic() - began
    cycles = metric(server, "gpuyard_controller_cycle_seconds_count") - before
    assert result["connected"] and result["sent"] > 0, result
    idle_pace = elapsed / CYCLE_S + 4
    assert cycles <= idle_pace, f"{cycles} cycles in {elapsed:.1f} s of flood ({result})"
    assert metric(server, "gpuyard_notify_datagrams_total", outcome="rejected") > 0
    assert metric(server, "gpuyard_notify_wakeups_total") == 0
