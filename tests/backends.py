"""The store's two backends in the tests: SQLite (a file under the test's data dir) and
PostgreSQL (a database of the session's server, tests/pgserver.py).

A suite runs on both by asking for `db_backend` in an autouse fixture (tests/store,
tests/controller, tests/api). On `pg`, every `open_store(data_dir)` that names no URL (the
tests' way) is sent to a fresh PostgreSQL database, one per data dir, dropped after its test
(a data dir under the test's tmp_path) or else after its module. A test that reads the SQLite file itself is marked `sqlite_only`.

`GPUYARD_TEST_PG`: unset, PostgreSQL runs where it can be started and is skipped (with the
reason) where not; `require` (make test), a server that cannot start fails the run; `off`,
only SQLite runs. `-m "not pg"` leaves the PostgreSQL runs out too.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import gpuyard.store
from pgserver import PgServer, PgUnavailable

SQLITE, PG = "sqlite", "pg"
ROUTER = pytest.StashKey["Router"]()  # the module's router while it runs on PG
ENV = "GPUYARD_TEST_PG"


def backend_params(metafunc: pytest.Metafunc) -> list[object]:
    """The backends one test runs on: both, unless it is `sqlite_only`, `one_backend` or PG
    is off."""
    params: list[object] = [SQLITE]
    off = os.environ.get(ENV) == "off"
    one = any(metafunc.definition.get_closest_marker(m) for m in ("sqlite_only", "one_backend"))
    if not off and not one:
        params.append(pytest.param(PG, marks=pytest.mark.pg))
    return params


class Router:
    """data dir → the URL of its own PostgreSQL database (made on first use)."""

    def __init__(self, server: PgServer) -> None:
        self.server = server
        self.urls: dict[Path, str] = {}

    def url_for(self, data_dir: Path) -> str:
        key = Path(data_dir).resolve()
        if key not in self.urls:
            self.urls[key] = self.server.fresh_database()
        return self.urls[key]

    def drop_under(self, root: Path | None = None) -> None:
        """Drop the databases of the data dirs under `root` (None: all of them)."""
        for key in list(self.urls):
            if root is None or key.is_relative_to(root.resolve()):
                self.server.drop(self.urls.pop(key))


def start_server() -> Iterator[PgServer | str]:
    """The session's server, or why there is none (a skip's reason); stopped at the end."""
    if os.environ.get(ENV) == "off":
        yield f"{ENV}=off"
        return
    try:
        server = PgServer.start()
    except PgUnavailable as e:
        if os.environ.get(ENV) == "require":
            raise
        yield f"PostgreSQL tests skipped: {e}"
        return
    try:
        yield server
    finally:
        server.stop()


def routed(server: PgServer | str) -> Iterator[Router]:
    """Send `open_store(data_dir)` to PostgreSQL while it lasts; drop what it made after."""
    if isinstance(server, str):
        pytest.skip(server)
    router = Router(server)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gpuyard.store, "sqlite_url", router.url_for)
        yield router
    router.drop_under(None)


@pytest.fixture(autouse=True)
def on_each_backend(db_backend: str, fresh_databases: None) -> str:
    """Imported by a suite's conftest: each of its tests on SQLite and on PostgreSQL."""
    return db_backend
