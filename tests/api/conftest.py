"""The real API (`create_app`) over a real store (tmp SQLite, or PostgreSQL: tests/backends.py)
and the real controller on the fake engine: a small world of two tenants, users in every
role, and one job in each tenant.

| user      | platform | red          | blue   |
|-----------|----------|--------------|--------|
| root      | admin    |              |        |
| redboss   |          | tenant-admin |        |
| alice     |          | member       |        |  owns job `red` (and its log)
| amy       |          | member       |        |
| vic       |          | viewer       |        |
| bob       |          |              | member |  owns job `blue`
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from backends import on_each_backend  # noqa: F401 - autouse: SQLite and PostgreSQL
from builders import make_node
from fake_engine import FakeEngine
from gpuyard.api import create_app
from gpuyard.controller import Controller
from gpuyard.model import FlavorQuota, ManualClock, Tenant
from gpuyard.store import Membership, PlatformRole, Store, TenantRole, open_store

USERS = {
    "root": (PlatformRole.ADMIN, {}),
    "redboss": (PlatformRole.USER, {"red": TenantRole.TENANT_ADMIN}),
    "alice": (PlatformRole.USER, {"red": TenantRole.MEMBER}),
    "amy": (PlatformRole.USER, {"red": TenantRole.MEMBER}),
    "vic": (PlatformRole.USER, {"red": TenantRole.VIEWER}),
    "bob": (PlatformRole.USER, {"blue": TenantRole.MEMBER}),
}
CALLERS = [*USERS, "anonymous", "badtoken"]
LOG = b"epoch 1\nepoch 2\n"


def spec(tenant: str, name: str = "t", extra: str = "") -> str:
    return (
        f"name: {name}\ntenant: {tenant}\n{extra}"
        "taskRoles:\n  main:\n    gpuNumber: 1\n    command: 'true'\n"
    )


@dataclass
class World:
    client: TestClient
    ctl: Controller
    store: Store
    engine: FakeEngine
    clock: ManualClock
    storage: Path
    tokens: dict[str, str] = field(default_factory=dict)
    jobs: dict[str, str] = field(default_factory=dict)

    def headers(self, who: str) -> dict[str, str]:
        if who == "anonymous":
            return {}
        if who == "badtoken":
            return {"Authorization": "Bearer gy_not-a-real-token"}
        return {"Authorization": f"Bearer {self.tokens[who]}"}

    def call(self, who: str, method: str, path: str, **kwargs):
        headers = {**self.headers(who), **kwargs.pop("headers", {})}
        return self.client.request(method, path, headers=headers, **kwargs)

    def submit(self, who: str, text: str):
        return self.call(
            who, "POST", "/api/v1/jobs", content=text, headers={"Content-Type": "application/yaml"}
        )


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    """A fresh world, for tests that change it."""
    yield from build_world(tmp_path)


@pytest.fixture(scope="module")
def shared_world(tmp_path_factory: pytest.TempPathFactory, db_backend: str) -> Iterator[World]:
    """One world for a module's read-only tests (much faster than one world each), on the
    module's backend."""
    yield from build_world(tmp_path_factory.mktemp("world"))


def build_world(tmp_path: Path) -> Iterator[World]:
    clock = ManualClock(1_000_000.0)
    store = open_store(tmp_path / "db", clock=clock)
    engine = FakeEngine(make_node("n1", gpus=4))
    ctl = Controller(store, engine, clock, stop_grace_s=5)
    storage = tmp_path / "storage"
    (storage / "data").mkdir(parents=True)
    for name, root in (("red", storage), ("blue", tmp_path / "blue-storage")):  # apart
        store.tenants.create(
            Tenant(name, (FlavorQuota("A100-80GB", 2),), storage_roots=(str(root),))
        )
    client = TestClient(create_app(ctl)).__enter__()  # one event-loop portal for all calls
    w = World(client, ctl, store, engine, clock, storage)
    for name, (role, tenants) in USERS.items():
        store.users.create(name, role, [Membership(t, r) for t, r in tenants.items()])
        w.tokens[name] = store.tokens.create(name, "test").secret
    for tenant, owner in (("red", "alice"), ("blue", "bob")):
        r = w.submit(owner, spec(tenant, name=f"{tenant}-job"))
        assert r.status_code == 201, r.text
        w.jobs[tenant] = r.json()["id"]
    ctl.run_cycle()
    for key in engine.launched:
        engine.logs[key] = LOG
    yield w
    client.__exit__(None, None, None)
    store.close()
