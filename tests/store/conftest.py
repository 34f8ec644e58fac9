"""The store suite runs on SQLite and on PostgreSQL (tests/backends.py): every test twice."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from backends import on_each_backend  # noqa: F401 - autouse: SQLite and PostgreSQL
from gpuyard.model import ManualClock
from gpuyard.store import Store, open_store


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_000_000.0)


@pytest.fixture
def store(tmp_path: Path, clock: ManualClock) -> Iterator[Store]:
    s = open_store(tmp_path, clock=clock)
    yield s
    s.close()
