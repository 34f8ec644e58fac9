"""The image endpoints on the real app, controller and local engine, with a real node runtime
and a registry on 127.0.0.1: list per node, pull (in the node's background) then state, remove,
gc, import; the nodes chosen by name or all, an unknown node a 404 that names the cluster's."""

from __future__ import annotations

import io
import shutil
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from gpuyard.api import create_app
from gpuyard.controller import Controller
from gpuyard.engine.agent import NodeAgent
from gpuyard.engine.local import LocalEngine
from gpuyard.model import ManualClock, Node
from gpuyard.runtime.executor import ContainerRuntime
from gpuyard.store import PlatformRole, open_store
from oci_registry import Registry, busybox_layout

pytestmark = [pytest.mark.container, pytest.mark.sqlite_only]  # the stores are the nodes'
NODE = "n1"


class Api:
    def __init__(self, client: TestClient, token: str, registry: Registry,
                 runtime: ContainerRuntime) -> None:
        self.client, self.registry, self.runtime = client, registry, runtime
        self.headers = {"Authorization": f"Bearer {token}"}

    def get(self, path: str, **params):
        return self.client.get(f"/api/v1/images{path}", params=params, headers=self.headers)

    def post(self, path: str, body: dict):
        return self.client.post(f"/api/v1/images{path}", json=body, headers=self.headers)

    def pulled(self, image: str) -> dict:
        """Pull on the node and wait until it stands present or failed."""
        r = self.post("/pull", {"image": image, "nodes": [NODE]})
        assert r.status_code == 200, r.text
        deadline = time.monotonic() + 30
        while (state := self.get("/state", image=image).json()["results"][0])["state"] == "pulling":
            assert time.monotonic() < deadline, state
            time.sleep(0.1)
        return state


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    if shutil.which("skopeo") is None or shutil.which("umoci") is None:
        pytest.skip("skopeo and umoci are needed (make system)")
    base = tmp_path_factory.mktemp("images-api")
    registry = Registry(busybox_layout(base))
    with pytest.MonkeyPatch.context() as env:
        env.setenv("GPUYARD_INSECURE_REGISTRIES", registry.host)
        runtime = ContainerRuntime(base / "node")
    clock = ManualClock(1_000_000.0)
    store = open_store(base / "db", clock=clock)
    ctl = Controller(store, LocalEngine(NodeAgent(Node(NODE, 4000, 8192), runtime)), clock)
    store.users.create("root", PlatformRole.ADMIN, [])
    token = store.tokens.create("root", "test").secret
    with TestClient(create_app(ctl)) as client:
        yield Api(client, token, registry, runtime)
    runtime.close()
    store.close()
    registry.close()


def test_pull_on_a_node_then_it_is_listed_there_and_removed(api: Api) -> None:
    image = f"{api.registry.host}/busybox:1"
    assert api.pulled(image) == {"node": NODE, "state": "present", "message": None, "removed": []}
    listed = api.get("").json()
    [entry] = [i for i in listed["images"] if i["name"] == image]
    assert [n["node"] for n in entry["nodes"]] == [NODE] and entry["nodes"][0]["size"] > 0
    assert listed["unreachable"] == []
    assert api.get("", node=NODE).json()["images"] == listed["images"]
    again = api.post("/pull", {"image": image, "allNodes": True}).json()
    assert again["results"] == [{"node": NODE, "state": "present", "message": None, "removed": []}]
    removed = api.post("/remove", {"image": image, "nodes": [NODE]}).json()
    assert removed["results"][0]["state"] == "removed"
    assert api.get("/state", image=image).json()["results"][0]["state"] == "absent"
    gone = api.post("/remove", {"image": image, "nodes": [NODE]}).json()["results"][0]
    assert gone["state"] == "failed" and f"no image {image} on this node" in gone["message"]


def test_a_failed_pull_says_why_and_gc_collects_per_node(api: Api, tmp_path: Path) -> None:
    failed = api.pulled(f"{api.registry.host}/busybox:nope")
    assert failed["state"] == "failed" and "manifest unknown" in failed["message"], failed
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w") as t:
        data = b"hello\n"
        info = tarfile.TarInfo("etc/hello")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    r = api.client.post("/api/v1/images/import", params={"name": "local/hello:1", "node": NODE},
                        content=tar.getvalue(), headers=api.headers)
    assert r.status_code == 200 and r.json()["results"][0]["state"] == "imported", r.text
    assert "local/hello:1" in [i["name"] for i in api.get("").json()["images"]]
    kept = api.post("/gc", {"allNodes": True}).json()["results"]
    assert kept == [{"node": NODE, "state": "collected", "message": None, "removed": []}]
    assert api.post("/gc", {"nodes": [NODE], "budgetGB": 0}).json()["results"][0]["removed"] == []
    api.runtime.images.recent_use_s = 0  # (imported just now: in use for 2 minutes)
    collected = api.post("/gc", {"nodes": [NODE], "budgetGB": 0}).json()["results"][0]
    assert collected["removed"] == ["local/hello:1"]


@pytest.mark.parametrize(("body", "status", "words"), [
    ({"image": "x:1", "nodes": ["nope"]}, 404, "no node nope in the cluster (its nodes: n1)"),
    ({"image": "x:1"}, 422, "name the nodes"),
    ({"image": "x:1", "nodes": [NODE], "allNodes": True}, 422, "name the nodes"),
    ({"image": "x:1", "nodes": []}, 422, "is empty"),
    ({"image": "Bad Name", "nodes": [NODE]}, 422, "bad image reference"),
])
def test_bad_node_choices_are_4xx_with_a_clear_message(api: Api, body, status, words) -> None:
    r = api.post("/pull", body)
    assert r.status_code == status and words in r.text, r.text
    assert api.get("", node="nope").status_code == 404
