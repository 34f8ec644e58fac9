"""What every controller test starts from: a manual clock at a fixed time and a store on it
(each test module brings its own fake cluster and controller)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuyard.model import ManualClock
from gpuyard.store import Store, open_store


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_000_000.0)


@pytest.fixture
def store(tmp_path: Path, clock: ManualClock) -> Store:
    return open_store(tmp_path, clock=clock)
