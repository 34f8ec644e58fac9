"""Shared test setup: make tests/ importable for the builders; the store's backends (SQLite,
and PostgreSQL on a server the session starts: tests/backends.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402

from backends import PG, ROUTER, SQLITE, backend_params, routed, start_server  # noqa: E402
from pgserver import PgServer  # noqa: E402
from tasknetworks import nodes_under, random_subnets, remove_node_network  # noqa: E402


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Groups for pytest-xdist's `--dist loadgroup` (`make test`): a module's tests stay on
    one worker, so its module-scoped worlds, servers and clusters are made once, and every Ray
    test is on the same worker, one cluster at a time (they all bind 127.0.0.2-4 and Ray's
    ports: tests/raycluster.py)."""
    for item in items:
        group = "ray" if item.get_closest_marker("ray") else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(autouse=True)
def task_subnets(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    """This test's task subnet and task network (env, read by ContainerRuntime and `gpuyard
    up`), and nothing its nodes made left after it (tasknetworks.py)."""
    subnet, network = random_subnets()
    monkeypatch.setenv("GPUYARD_TASK_SUBNET", subnet)
    monkeypatch.setenv("GPUYARD_TASK_NETWORK", network)
    # where a test's nodes keep their state (asked for now: it is then torn down after this)
    tmp = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield subnet, network
    for tag in nodes_under(tmp) if tmp is not None else ():
        remove_node_network(tag)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer | str]:
    """The session's PostgreSQL server (tests/pgserver.py), started on first use and stopped
    at the session's end, or the reason there is none."""
    yield from start_server()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """`db_backend`: SQLite and PostgreSQL (tests/backends.py), module by module."""
    if "db_backend" in metafunc.fixturenames:
        metafunc.parametrize("db_backend", backend_params(metafunc), indirect=True, scope="module")


@pytest.fixture(scope="module")
def db_backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """The backend this module's stores open on: `sqlite`, or `pg` (routed to the server)."""
    if request.param == SQLITE:
        yield SQLITE
        return
    for router in routed(request.getfixturevalue("pg_server")):
        request.config.stash[ROUTER] = router
        yield PG
        del request.config.stash[ROUTER]


@pytest.fixture
def fresh_databases(request: pytest.FixtureRequest, db_backend: str, tmp_path: Path):
    """The PostgreSQL databases of the data dirs under the test's tmp_path dropped after it
    (those of module-scoped worlds stay until the module's end)."""
    yield
    router = request.config.stash.get(ROUTER, None) if db_backend == PG else None
    if router:
        router.drop_under(tmp_path)


@pytest.fixture
def pg_database(pg_server: PgServer | str) -> Iterator[str]:
    """The URL of a new, empty database of the session's server (dropped after the test),
    for a real `gpuyard up --db-url`; the test is skipped with the reason where none runs."""
    if isinstance(pg_server, str):
        pytest.skip(pg_server)
    url = pg_server.empty_database()
    yield url
    pg_server.drop(url)
