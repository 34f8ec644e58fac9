"""The crash-safety loop, short: kill -9 the real server 5 times during a burst of jobs; every
job succeeds, no attempt runs twice, and no container, cgroup, mount or task dir is left
(`bench/crash_loop.py` runs the long version: 30 restarts, docs/benchmarks.md)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import crash_loop  # noqa: E402 - bench/ is not a package


def test_kill9_restarts_during_a_burst_lose_nothing_and_leave_nothing(tmp_path: Path) -> None:
    report = crash_loop.run(restarts=5, jobs=12, seed=1, workdir=tmp_path)
    assert report.clean, report
