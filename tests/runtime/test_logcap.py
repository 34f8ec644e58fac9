"""The log cap without a container: head and tail kept, every byte counted, on a file system
that collapses ranges (the test's tmp dir: ext4 here) and on one that cannot (tmpfs, where
the log is rewritten), and through a pipe as the supervisor pumps it."""

from __future__ import annotations

import os
import select
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuyard.runtime.logcap import MIB, CappedLog, LogPump, dropped_bytes

LINES = 300_000  # ~10 MiB of numbered lines


@pytest.fixture(params=["disk", "tmpfs"])
def log_dir(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    if request.param == "disk":
        yield tmp_path
        return
    if not Path("/dev/shm").is_dir():
        pytest.skip("no /dev/shm")
    with tempfile.TemporaryDirectory(dir="/dev/shm") as d:
        yield Path(d)


def lines(n: int = LINES) -> bytes:
    return b"".join(f"line {i:07d}\n".encode() for i in range(n))


def check(log: Path, printed: bytes, cap: CappedLog) -> None:
    data = log.read_bytes()
    dropped = dropped_bytes(log)
    assert len(data) <= cap.limit and dropped > 0
    assert data[: cap.head] == printed[: cap.head]  # the head, as printed
    tail = data[cap.tail_at :]
    assert printed.endswith(tail) and len(tail) >= cap.limit - cap.tail_at - cap.slack
    marker = data[cap.head : cap.tail_at]
    assert marker.startswith(f"\n[gpuyard: {dropped} bytes".encode()) and marker.endswith(b"\n")
    assert len(data) - cap.block + dropped == len(printed)


def test_written_log_keeps_head_and_tail(log_dir: Path) -> None:
    log = log_dir / "log"
    cap = CappedLog(log, MIB)
    printed = lines()
    for start in range(0, len(printed), 4000):
        cap.write(printed[start : start + 4000])
    cap.close()
    check(log, printed, cap)


def test_pumped_log_keeps_head_and_tail(log_dir: Path) -> None:
    log = log_dir / "log"
    pump = LogPump(CappedLog(log, MIB))
    printed = lines()
    writer = os.fork()
    if writer == 0:  # a task printing without end, then gone
        os.close(pump.read_end)
        os.write(pump.write_end, printed)
        os._exit(0)
    pump.close_write_end()
    pump.drain(30)
    os.waitpid(writer, 0)
    assert pump.eof
    cap = pump.log
    pump.close()
    check(log, printed, cap)


def test_a_small_log_is_whole(tmp_path: Path) -> None:
    cap = CappedLog(tmp_path / "log", MIB)
    cap.write(b"hello\n")
    cap.close()
    assert (tmp_path / "log").read_bytes() == b"hello\n" and dropped_bytes(tmp_path / "log") == 0


def test_the_pump_keeps_to_its_rate(tmp_path: Path) -> None:
    """A flood is moved at most `rate` bytes a second (the supervisor's CPU is not the
    task's): 3 rates' worth takes the supervisor's loop more than 2 s."""
    rate = 64 << 10
    pump = LogPump(CappedLog(tmp_path / "log", MIB), rate=rate)
    writer = os.fork()
    if writer == 0:
        os.close(pump.read_end)
        os.write(pump.write_end, b"x" * (3 * rate))
        os._exit(0)
    pump.close_write_end()
    started = time.monotonic()
    while not pump.eof:  # as the supervisor's wait loop does
        wait = pump.wait_s()
        ready, _, _ = select.select(pump.fds(), [], [], wait if wait > 0 else 1.0)
        if ready:
            pump.pump_ready()
    took = time.monotonic() - started
    os.waitpid(writer, 0)
    pump.close()
    assert took >= 2.0 and (tmp_path / "log").stat().st_size == 3 * rate
