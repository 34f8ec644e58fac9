"""Tenant administration: create, read, update (generic over the `Tenant` fields), members,
users."""

from __future__ import annotations

import dataclasses

from gpuyard.model import Tenant


def test_create_read_update_round_trip(world):
    green = f"{world.storage.parent}/green"  # the platform makes a missing root: not in /srv
    body = {
        "name": "green",
        "quotas": [{"flavor": "A100-80GB", "guaranteed": 4, "borrowingLimit": 2}],
        "weight": 2.5,
        "queuePolicy": "las",
        "storageRoots": [green.replace("/green", "//green/"), green],
        "maxGpusPerUser": 2,
    }
    r = world.call("root", "POST", "/api/v1/tenants", json=body)
    assert r.status_code == 201, r.text
    got = world.call("root", "GET", "/api/v1/tenants/green").json()
    assert got["quotas"] == [
        {
            "flavor": "A100-80GB",
            "guaranteed": 4,
            "borrowingLimit": 2,
            "lendingLimit": None,
            "gpuMemoryMB": None,
            "gpuMemoryBorrowingLimitMB": None,
            "gpuMemoryLendingLimitMB": None,
        }
    ]
    assert got["storageRoots"] == [green] and got["queuePolicy"] == "las"
    r = world.call("root", "PATCH", "/api/v1/tenants/green", json={"weight": 1})
    assert r.json()["weight"] == 1 and r.json()["maxGpusPerUser"] == 2
    stored = world.store.tenants.get("green").tenant
    assert stored.weight == 1 and stored.quotas[0].guaranteed == 4


def test_gpu_memory_quotas_are_stored_and_checked(world):
    """A flavor quota in GPU memory (MB) for shared-GPU tasks (docs/gpu-sharing.md)."""
    quota = {"flavor": "A100-80GB", "guaranteed": 0, "gpuMemoryMB": 40000,
             "gpuMemoryBorrowingLimitMB": 20000, "gpuMemoryLendingLimitMB": 0}  # fmt: skip
    r = world.call("root", "POST", "/api/v1/tenants", json={"name": "mem", "quotas": [quota]})
    assert r.status_code == 201, r.text
    assert r.json()["quotas"][0]["gpuMemoryMB"] == 40000
    stored = world.store.tenants.get("mem").tenant.quotas[0]
    assert (stored.gpu_memory_mb, stored.gpu_memory_borrowing_limit_mb) == (40000, 20000)
    bad = {"name": "mem2", "quotas": [{**quota, "gpuMemoryMB": -1}]}
    r = world.call("root", "POST", "/api/v1/tenants", json=bad)
    assert r.status_code == 422
    assert [e["path"] for e in r.json()["errors"]] == ["quotas[0].gpuMemoryMB"]


def test_every_tenant_field_is_served(shared_world):
    got = shared_world.call("root", "GET", "/api/v1/tenants/red").json()
    camel = {f.name.replace("_", "") for f in dataclasses.fields(Tenant)}
    assert camel <= {k.lower() for k in got}


def test_bad_tenants_name_each_field(world):
    body = {
        "name": "bad name",
        "weight": 0,
        "quotas": [{"flavor": "A100", "guaranteed": -1}],
        "storageRoots": ["relative/path"],
    }
    r = world.call("root", "POST", "/api/v1/tenants", json=body)
    assert r.status_code == 422
    paths = {e["path"] for e in r.json()["errors"]}
    assert paths == {"name", "weight", "quotas[0].guaranteed", "storageRoots[0]"}
    r = world.call("root", "POST", "/api/v1/tenants", json={"name": "x", "wieght": 2})
    assert r.status_code == 422 and r.json()["errors"][0]["path"] == "wieght"
    r = world.call("root", "POST", "/api/v1/tenants", json={"name": "x", "queuePolicy": "lifo"})
    assert r.json()["errors"][0]["path"] == "queuePolicy"


def test_duplicates_and_unknowns(world):
    assert world.call("root", "POST", "/api/v1/tenants", json={"name": "red"}).status_code == 409
    assert world.call("root", "PATCH", "/api/v1/tenants/nope", json={}).status_code == 404
    r = world.call("root", "PATCH", "/api/v1/tenants/red", json={"name": "blue"})
    assert r.status_code == 422


def test_lists_show_only_the_callers_tenants(shared_world):
    def names(who):
        return [
            t["name"] for t in shared_world.call(who, "GET", "/api/v1/tenants").json()["tenants"]
        ]

    assert names("root") == ["blue", "red"]
    assert names("alice") == ["red"] and names("bob") == ["blue"]


def test_a_tenant_admin_manages_members(world):
    r = world.call("redboss", "PUT", "/api/v1/tenants/red/members/bob", json={"role": "member"})
    assert r.status_code == 204
    assert (
        world.submit(
            "bob", "name: x\ntenant: red\ntaskRoles:\n  m:\n    command: 'true'\n"
        ).status_code
        == 201
    )
    members = world.call("alice", "GET", "/api/v1/tenants/red/members").json()["members"]
    assert {"user": "bob", "role": "member"} in members
    assert world.call("redboss", "DELETE", "/api/v1/tenants/red/members/bob").status_code == 204
    assert world.call("bob", "GET", f"/api/v1/jobs/{world.jobs['red']}").status_code == 404
    r = world.call("redboss", "PUT", "/api/v1/tenants/red/members/ghost", json={})
    assert r.status_code == 404


def test_create_user_with_memberships_then_a_token(world):
    body = {"name": "carol", "memberships": [{"tenant": "blue", "role": "viewer"}]}
    r = world.call("root", "POST", "/api/v1/users", json=body)
    assert r.status_code == 201 and r.json()["memberships"] == body["memberships"]
    token = world.call("root", "POST", "/api/v1/users/carol/tokens").json()["token"]
    me = world.client.get("/api/v1/whoami", headers={"Authorization": f"Bearer {token}"})
    assert me.json()["name"] == "carol"
    assert world.call("root", "POST", "/api/v1/users", json={"name": "carol"}).status_code == 409
    r = world.call(
        "root", "POST", "/api/v1/users", json={"name": "dan", "memberships": [{"tenant": "nope"}]}
    )
    assert r.status_code == 422 and r.json()["errors"][0]["path"] == "memberships[0].tenant"
    assert world.call("root", "POST", "/api/v1/users/ghost/tokens").status_code == 404
