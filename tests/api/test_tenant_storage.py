"""A tenant's named storage through the API (`/api/v1/tenants/{name}/storage`) and what a job
that names it gets: set, list, remove; its checks (a path under the tenant's roots, a mount
point below /mnt, none hiding another); a job's `storage` (and OpenPAI's teamwise_storage)
resolved at submission and carried to its tasks' launches on the fake engine."""

from __future__ import annotations

import pytest

from api.conftest import spec
from gpuyard.model.storage import StorageMount

BASE = "/api/v1/tenants/red/storage"


def put(world, name: str, who: str = "root", **body):
    return world.call(who, "PUT", f"{BASE}/{name}", json=body)


def openpai(names: str) -> str:
    return (
        "protocolVersion: 2\nname: pai\ntype: job\ndefaults: {virtualCluster: red}\n"
        "taskRoles:\n  main:\n    resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 1}\n"
        "    commands: ['true']\nextras:\n  com.microsoft.pai.runtimeplugin:\n"
        f"    - plugin: teamwise_storage\n      parameters: {{storageConfigNames: {names}}}\n"
    )


def test_set_list_replace_remove(world):
    r = put(world, "datasets", path=str(world.storage / "data"))
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["mountPoint"] == "/mnt/datasets" and out["readOnly"] is True
    assert out["updatedBy"] == "root" and out["path"] == str(world.storage / "data")
    r = put(world, "datasets", path=str(world.storage), mountPoint="/mnt/ds", readOnly=False)
    assert r.status_code == 200 and r.json()["mountPoint"] == "/mnt/ds", r.text
    for who in ("root", "redboss", "alice", "vic"):  # every role in the tenant reads them
        r = world.call(who, "GET", BASE)
        assert r.status_code == 200, r.text
        [entry] = r.json()["storage"]
        assert (entry["name"], entry["readOnly"]) == ("datasets", False)
    assert world.call("root", "DELETE", f"{BASE}/datasets").status_code == 204
    assert world.call("root", "GET", BASE).json() == {"storage": []}
    r = world.call("root", "DELETE", f"{BASE}/datasets")
    assert r.status_code == 404 and "no storage named datasets" in r.text


@pytest.mark.parametrize(
    ("body", "path", "words"),
    [
        ({"path": "relative/dir"}, "path", "absolute path"),
        ({"path": "/srv/../etc"}, "path", "'..'"),
        ({"path": "/var/lib/elsewhere"}, "path", "outside the storage roots of tenant red"),
        ({"path": "{root}", "mountPoint": "/data"}, "mountPoint", "below /mnt"),
        ({"path": "{root}", "mountPoint": "/mnt"}, "mountPoint", "below /mnt"),
        ({"path": "{root}", "mountPoint": "/mnt/a/../b"}, "mountPoint", "normalised"),
        ({"path": "{root}", "readOnly": "yes"}, "readOnly", "boolean"),
        ({"path": "{root}", "readonly": True}, "readonly", "Extra inputs"),
    ],
)
def test_bad_bodies_are_422_at_their_field(world, body, path, words):
    body = {k: v.format(root=world.storage) if isinstance(v, str) else v for k, v in body.items()}
    r = put(world, "ds", **body)
    assert r.status_code == 422, r.text
    [error] = r.json()["errors"]
    assert error["path"].removeprefix("body.") == path and words in error["message"], error


def test_a_bad_name_and_an_overlapping_mount_point_are_refused(world):
    r = put(world, "../etc", path=str(world.storage))
    assert r.status_code in (404, 422), r.text
    r = put(world, "-x", path=str(world.storage))
    assert r.status_code == 422 and r.json()["errors"][0]["path"] == "name", r.text
    assert put(world, "a", path=str(world.storage), mountPoint="/mnt/a").status_code == 200
    r = put(world, "b", path=str(world.storage), mountPoint="/mnt/a/b")
    assert r.status_code == 422, r.text
    assert "overlaps /mnt/a, the mount point of storage a" in r.json()["errors"][0]["message"]
    assert put(world, "a", path=str(world.storage), mountPoint="/mnt/a2").status_code == 200


def test_a_job_naming_storage_gets_it_in_every_task(world):
    assert put(world, "datasets", path=str(world.storage / "data")).status_code == 200
    r = world.submit("alice", spec("red", name="st", extra="storage: [datasets]\n"))
    assert r.status_code == 201, r.text
    job_id = r.json()["id"]
    world.ctl.run_cycle()
    [key] = world.engine.keys_on(job_id)
    mount = StorageMount("datasets", str(world.storage / "data"), "/mnt/datasets", True)
    assert world.engine.launched[key].storage == (mount,)
    shown = world.call("alice", "GET", f"/api/v1/jobs/{job_id}").json()
    assert shown["spec"]["storage"] == ["datasets"]


def test_an_unknown_name_is_422_at_its_path_in_both_formats(world):
    r = world.submit("alice", spec("red", extra="storage: [nope]\n"))
    assert r.status_code == 422, r.text
    [error] = r.json()["errors"]
    assert error["path"] == "storage[0]" and "tenant red has no storage named 'nope'" in error[
        "message"]
    assert put(world, "confignfs", path=str(world.storage)).status_code == 200
    r = world.submit("alice", openpai("[confignfs, nope]"))
    assert r.status_code == 422, r.text
    [error] = r.json()["errors"]
    plugin = "extras.com.microsoft.pai.runtimeplugin[0]"
    assert error["path"] == f"{plugin}.parameters.storageConfigNames[1]", error
    r = world.submit("alice", openpai("[confignfs]"))
    assert r.status_code == 201, r.text


def test_storage_removed_after_submission_fails_the_job_at_launch(world):
    assert put(world, "datasets", path=str(world.storage / "data")).status_code == 200
    r = world.submit("alice", spec("red", name="late", extra="storage: [datasets]\n"))
    assert r.status_code == 201, r.text
    assert world.call("root", "DELETE", f"{BASE}/datasets").status_code == 204
    world.ctl.run_cycle()
    world.ctl.run_cycle()
    job = world.call("alice", "GET", f"/api/v1/jobs/{r.json()['id']}").json()
    assert job["state"] == "FAILED" and job["reason"] == "InvalidSpec", job
    assert "storage datasets: tenant red has no such storage any more" in job["message"]
    assert world.engine.keys_on(r.json()["id"]) == []
