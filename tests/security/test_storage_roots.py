"""Storage roots and tenant ids through the real API (in-process, on the fake engine): what
an admin's tenant settings could otherwise hand one tenant over another's data.

- a root inside, around or equal to another tenant's root would let the outer tenant rename
  the inner one's root and put a link in its place (launches open roots as given);
- a system dir as a root would be shown to every task without an image, or handed over;
- a caller-chosen uid would let a tenant share another tenant's identity.
"""

from __future__ import annotations

import stat

import pytest


def tenant(name: str, *roots: str, **more) -> dict:
    return {"name": name, "storageRoots": list(roots), **more}


@pytest.mark.parametrize("where", ["same", "inside", "around"])
def test_a_root_may_not_overlap_another_tenants(world, where):
    red = str(world.storage)  # red's root
    root = {"same": red, "inside": f"{red}/sub", "around": str(world.storage.parent)}[where]
    r = world.call("root", "POST", "/api/v1/tenants", json=tenant("green", root))
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["path"] == "storageRoots[0]"
    r = world.call("root", "PATCH", "/api/v1/tenants/blue", json={"storageRoots": [root]})
    assert r.status_code == 422, r.text


@pytest.mark.parametrize("root", ["/", "/tmp", "/home", "/etc/gpuyard", "/usr/local/data",
                                  "/opt/team", "/proc/1"])
def test_a_system_dir_is_never_a_root(world, root):
    r = world.call("root", "POST", "/api/v1/tenants", json=tenant("green", root))
    assert r.status_code == 422 and "system dir" in r.text, r.text


def test_the_uid_is_the_platforms_to_give(world):
    red_uid = world.store.tenants.get("red").tenant.uid
    r = world.call("root", "POST", "/api/v1/tenants", json=tenant("green", uid=red_uid))
    assert r.status_code == 422 and r.json()["errors"][0]["path"] == "uid", r.text
    r = world.call("root", "PATCH", "/api/v1/tenants/blue", json={"uid": red_uid})
    assert r.status_code == 422, r.text
    made = world.call("root", "POST", "/api/v1/tenants", json=tenant("green"))
    assert made.status_code == 201 and made.json()["uid"] not in (
        red_uid, world.store.tenants.get("blue").tenant.uid
    )


def test_a_new_root_is_made_the_tenants_own(world):
    root = world.storage.parent / "green-root"
    r = world.call("root", "POST", "/api/v1/tenants", json=tenant("green", str(root)))
    assert r.status_code == 201, r.text
    st = root.stat()
    uid = r.json()["uid"]
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (uid, uid, 0o700)
