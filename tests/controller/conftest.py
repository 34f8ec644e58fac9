"""What every controller test starts from: a manual clock at a fixed time and a store on it
(each test module brings its own fake cluster and controller); on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest

from backends import on_each_backend  # noqa: F401 - autouse: SQLite and PostgreSQL
from gpuyard.model import ManualClock
from gpuyard.store import Store, open_store


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_000_000.0)


@pytest.fixture
def store(tmp_path: Path, clock: ManualClock) -> Store:
    return open_store(tmp_path, clock=clock)
