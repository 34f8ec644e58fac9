"""A tenant's named storage (OpenPAI's teamwise_storage), attacked by a hostile member: naming
another tenant's storage, reading or changing its definitions, pointing a definition at
another tenant's data (directly or through a link), swapping a link in after it was defined,
and writing to a read-only one. The API in-process (`world`: tenants red and blue, users in
every role) and the real server with real containers (`server`)."""

from __future__ import annotations

import os
import shutil
import textwrap
from pathlib import Path

import pytest

from api.conftest import spec

INVALID = "InvalidSpec"


def put(world, tenant: str, name: str, who: str = "root", **body):
    return world.call(who, "PUT", f"/api/v1/tenants/{tenant}/storage/{name}", json=body)


def blue_root(world) -> Path:
    root = Path(world.store.tenants.get("blue").tenant.storage_roots[0])
    root.mkdir(parents=True, exist_ok=True)
    return root


def test_a_name_resolves_only_in_the_jobs_own_tenant(world):
    """Red defines `shared`; bob (blue) names it: refused exactly as a name no tenant has, and
    no task of blue ever gets red's path. Bob cannot submit to red at all."""
    assert put(world, "red", "shared", path=str(world.storage / "data")).status_code == 200
    answers = {}
    for name in ("shared", "nosuch"):
        r = world.submit("bob", spec("blue", extra=f"storage: [{name}]\n"))
        assert r.status_code == 422, r.text
        [error] = r.json()["errors"]
        assert error["path"] == "storage[0]"
        answers[name] = error["message"].replace(name, "NAME")
    assert answers["shared"] == answers["nosuch"]
    r = world.submit("bob", spec("red", extra="storage: [shared]\n"))
    assert r.status_code in (403, 422) and str(world.storage) not in r.text, r.text
    world.ctl.run_cycle()
    assert all(str(world.storage) not in m.path for launch in world.engine.launched.values()
               for m in launch.storage)  # fmt: skip


def test_each_tenant_gets_its_own_storage_of_the_same_name(world):
    blue = blue_root(world) / "data"
    blue.mkdir()
    assert put(world, "red", "data", path=str(world.storage / "data")).status_code == 200
    assert put(world, "blue", "data", path=str(blue)).status_code == 200
    r = world.submit("bob", spec("blue", name="b", extra="storage: [data]\n"))
    assert r.status_code == 201, r.text
    world.ctl.run_cycle()
    [key] = world.engine.keys_on(r.json()["id"])
    assert [m.path for m in world.engine.launched[key].storage] == [str(blue)]


@pytest.mark.parametrize("who", ["redboss", "alice", "vic", "bob"])
def test_only_a_platform_admin_defines_or_removes_storage(world, who):
    assert put(world, "red", "shared", path=str(world.storage / "data")).status_code == 200
    r = put(world, "red", "mine", who, path=str(world.storage))
    assert r.status_code == 403, r.text
    r = put(world, "red", "shared", who, path="/etc", readOnly=False)
    assert r.status_code == 403, r.text
    r = world.call(who, "DELETE", "/api/v1/tenants/red/storage/shared")
    assert r.status_code == 403, r.text
    [entry] = world.call("root", "GET", "/api/v1/tenants/red/storage").json()["storage"]
    assert entry["path"] == str(world.storage / "data") and entry["readOnly"] is True


def test_a_member_of_another_tenant_cannot_list_its_storage(world):
    assert put(world, "red", "shared", path=str(world.storage / "data")).status_code == 200
    r = world.call("bob", "GET", "/api/v1/tenants/red/storage")
    assert r.status_code == 404 and "shared" not in r.text, r.text
    assert world.call("bob", "GET", "/api/v1/tenants/nosuch/storage").text.replace(
        "nosuch", "red") == r.text


def test_a_definition_cannot_reach_into_another_tenants_root(world):
    """Blue's storage may not be red's root, a dir in it, or a link in blue's root to it."""
    link = blue_root(world) / "to-red"
    link.symlink_to(world.storage / "data")
    for path in (world.storage, world.storage / "data", link, Path("/etc")):
        r = put(world, "blue", "x", path=str(path))
        assert r.status_code == 422, r.text
        assert r.json()["errors"][0]["path"] == "path"
    assert world.call("root", "GET", "/api/v1/tenants/blue/storage").json() == {"storage": []}


def test_storage_outside_the_roots_after_they_changed_is_refused(world):
    assert put(world, "red", "data", path=str(world.storage / "data")).status_code == 200
    r = world.call("root", "PATCH", "/api/v1/tenants/red",
                   json={"storageRoots": [str(world.storage / "other")]})  # fmt: skip
    assert r.status_code == 200, r.text
    r = world.submit("alice", spec("red", extra="storage: [data]\n"))
    assert r.status_code == 422 and "no longer under its storage roots" in r.text, r.text


# -- the real server, real containers ----------------------------------------------------


def job(name: str, command: str, storage: list[str], extra: str = "") -> str:
    body = textwrap.indent(command, " " * 6)
    return (f"name: {name}\nstorage: [{', '.join(storage)}]\n{extra}taskRoles:\n  main:\n"
            f"    command: |\n{body}\n")  # fmt: skip


def define(server, name: str, path: Path, read_only: bool = True) -> None:
    r = server.http.put(f"/api/v1/tenants/default/storage/{name}",
                        json={"path": str(path), "readOnly": read_only})  # fmt: skip
    assert r.status_code == 200, r.text


def tenant_dir(server, path: Path) -> None:
    uid = server.http.get("/api/v1/tenants/default").json()["uid"]
    path.mkdir(parents=True)
    os.chown(path, uid, uid)


def test_read_only_storage_is_read_only_and_read_write_is_writable(server):
    ro, rw = server.storage / "ro", server.storage / "rw"
    tenant_dir(server, ro)
    tenant_dir(server, rw)
    (ro / "seen").write_text("hello\n")
    define(server, "ro", ro)
    define(server, "rw", rw, read_only=False)
    probe = ("cat /mnt/ro/seen\n(echo x > /mnt/ro/new) 2>/dev/null || echo ro-refused\n"
             "echo y > /mnt/rw/new && echo rw-ok\n")  # fmt: skip
    done = server.wait(server.submit(job("rw", probe, ["ro", "rw"])))
    assert done["state"] == "SUCCEEDED", done
    assert server.logs(done["id"]).split() == ["hello", "ro-refused", "rw-ok"]
    assert not (ro / "new").exists() and (rw / "new").read_text() == "y\n"


def test_a_link_swapped_in_after_the_definition_is_not_followed(server):
    """`ds` is a dir when the admin defines it and when the job is submitted (the submit check
    passes); a link to /etc (or to the platform's data) takes its place before the job starts:
    the task is refused at launch, never retried, and sees neither."""
    ds, gate = server.storage / "ds", server.storage / "gate"
    tenant_dir(server, gate)
    wait = "while [ ! -e /data/go ]; do sleep 0.05; done"
    for target in (Path("/etc"), server.data_dir):
        if ds.is_symlink():
            ds.unlink()
        tenant_dir(server, ds)
        define(server, "ds", ds, read_only=False)
        (gate / "go").unlink(missing_ok=True)
        blocker = server.submit(f"name: gate\ndataDir: {gate}\ntaskRoles:\n  main:\n"
                                f"    command: '{wait}'\n")  # fmt: skip
        after = f"after: {{any: [{blocker}]}}\n"
        swapped = server.submit(job("swap", "ls /mnt/ds; echo pwned > /mnt/ds/x", ["ds"], after))
        shutil.rmtree(ds)
        ds.symlink_to(target)
        (gate / "go").touch()
        assert server.wait(blocker)["state"] == "SUCCEEDED"
        done = server.wait(swapped)
        assert done["state"] == "FAILED" and done["reason"] == INVALID, done
        assert done["attempt"] == 1 and "symbolic link" in done["message"], done
        assert str(target) not in done["message"] and not (target / "x").exists()
