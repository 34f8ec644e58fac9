"""The real API in-process for the API-contract security tests: `create_app` over a real
store on tmp SQLite and the real controller on the fake engine (tests/api's world: tenants red
and blue, users in every role). Server errors are answered (500), never raised into the test,
as a client would see them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.conftest import World, build_world


def answering(world: World) -> World:
    """`world` with a client that answers a server error with its 500, as a server would."""
    world.client = TestClient(world.client.app, raise_server_exceptions=False).__enter__()
    return world


def answering_world(tmp_path: Path) -> Iterator[World]:
    """A fresh world (for a fixture): its client answers server errors with their 500."""
    for w in build_world(tmp_path):
        yield answering(w)
        w.client.__exit__(None, None, None)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    """A fresh in-process API world, for tests that change it."""
    yield from answering_world(tmp_path)


@pytest.fixture(scope="module")
def shared_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """One in-process API world for a module's tests that only read (or add jobs)."""
    yield from answering_world(tmp_path_factory.mktemp("world"))
