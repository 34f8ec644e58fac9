"""The nodes' image stores as a hostile member would reach them (issue 20): every image endpoint
is a platform admin's (a member or a tenant admin would list other tenants' private image
names, or evict them from a node with rm or gc); the cluster page gives others a count, never
the names; a job's page says where its own images are, and nothing of another tenant's."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from builders import make_node
from fake_images import ImageEngine
from gpuyard.api import create_app
from gpuyard.controller import Controller
from gpuyard.model import FlavorQuota, ManualClock, Tenant
from gpuyard.store import Membership, PlatformRole, TenantRole, open_store

pytestmark = pytest.mark.sqlite_only  # the store is not what is under test
SECRET = "registry.blue.corp/blue/secret-model:7"
MINE = "registry.red.corp/red/app:1"
USERS = {"root": (PlatformRole.ADMIN, {}),
         "redboss": (PlatformRole.USER, {"red": TenantRole.TENANT_ADMIN}),
         "alice": (PlatformRole.USER, {"red": TenantRole.MEMBER}),
         "vic": (PlatformRole.USER, {"red": TenantRole.VIEWER})}
CALLS = [("GET", "/api/v1/images", None), ("GET", f"/api/v1/images/state?image={SECRET}", None),
         ("POST", "/api/v1/images/pull", {"image": SECRET, "allNodes": True}),
         ("POST", "/api/v1/images/remove", {"image": SECRET, "allNodes": True}),
         ("POST", "/api/v1/images/gc", {"allNodes": True, "budgetGB": 0})]


class World:
    def __init__(self, client: TestClient, ctl: Controller, tokens: dict[str, str]) -> None:
        self.client, self.ctl, self.tokens = client, ctl, tokens

    def call(self, who: str, method: str, path: str, body=None, **kw):
        headers = {"Authorization": f"Bearer {self.tokens[who]}", **kw.pop("headers", {})}
        return self.client.request(method, path, json=body, headers=headers, **kw)

    def page(self, who: str, path: str) -> str:
        r = self.client.get(path, headers={"Cookie": f"gpuyard_session={self.tokens[who]}"})
        assert r.status_code == 200, r.text
        return r.text


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base: Path = tmp_path_factory.mktemp("node-images")
    clock = ManualClock(1_000_000.0)
    store = open_store(base / "db", clock=clock)
    engine = ImageEngine(make_node("n1", gpus=2))
    engine.held = {"n1": [SECRET, MINE]}  # blue's private image beside red's
    ctl = Controller(store, engine, clock)
    for name in ("red", "blue"):
        store.tenants.create(Tenant(name, (FlavorQuota("A100-80GB", 2),)))
    tokens = {}
    for name, (role, tenants) in USERS.items():
        store.users.create(name, role, [Membership(t, r) for t, r in tenants.items()])
        tokens[name] = store.tokens.create(name, "test").secret
    assert ctl.prepull is not None
    ctl.prepull.start()  # its first turn lists every node's images
    deadline = time.monotonic() + 10
    while not ctl.prepull.held():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    ctl.prepull.stop()
    with TestClient(create_app(ctl), raise_server_exceptions=False) as client:
        yield World(client, ctl, tokens)
    store.close()


@pytest.mark.parametrize("who", ["redboss", "alice", "vic"])
@pytest.mark.parametrize(("method", "path", "body"), CALLS)
def test_image_endpoints_are_a_platform_admins(world: World, who, method, path, body) -> None:
    r = world.call(who, method, path, body)
    assert r.status_code == 403 and "only a platform admin" in r.json()["detail"], r.text
    assert SECRET not in r.text


def test_an_import_is_refused_before_its_body_is_read(world: World) -> None:
    r = world.call("alice", "POST", "/api/v1/images/import?name=x:1&allNodes=true",
                   content=b"x" * 1024)
    assert r.status_code == 403


def test_the_admin_lists_what_members_may_not(world: World) -> None:
    listed = world.call("root", "GET", "/api/v1/images").json()
    assert {i["name"] for i in listed["images"]} == {SECRET, MINE}
    assert SECRET in world.page("root", "/cluster")


@pytest.mark.parametrize("who", ["redboss", "alice", "vic"])
def test_the_cluster_page_counts_a_nodes_images_without_naming_them(world: World, who) -> None:
    page = world.page(who, "/cluster/grid")
    assert "images: 2" in page
    assert SECRET not in page and MINE not in page


def test_a_job_shows_where_its_own_image_is_and_nothing_else(world: World) -> None:
    spec = f"name: mine\ntenant: red\nimage: {MINE}\ntaskRoles:\n  main:\n    command: 'true'\n"
    r = world.call("alice", "POST", "/api/v1/jobs", content=spec,
                   headers={"Content-Type": "application/yaml"})
    assert r.status_code == 201, r.text
    job = world.call("vic", "GET", f"/api/v1/jobs/{r.json()['id']}").json()
    assert job["images"] == [{"image": MINE, "nodes": {"n1": "present"}}]
    page = world.page("vic", f"/jobs/{r.json()['id']}")
    assert MINE in page and SECRET not in page
