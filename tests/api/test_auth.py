"""Tokens: 401s that say how to log in, hashed storage, revocation, expiry, shown once."""

from __future__ import annotations

import sqlite3

import pytest

from gpuyard.store.tokens import hash_token


@pytest.mark.parametrize(
    ("header", "error"),
    [
        (None, None),
        ("Bearer gy_wrong", "invalid_token"),
        ("Bearer nonsense", "invalid_token"),
        ("Basic dXNlcjpwdw==", "invalid_request"),
        ("Bearer ", "invalid_request"),
    ],
)
def test_401_challenges_and_says_how_to_log_in(shared_world, header, error):
    headers = {"Authorization": header} if header else {}
    r = shared_world.client.get("/api/v1/jobs", headers=headers)
    assert r.status_code == 401
    assert r.headers["WWW-Authenticate"].startswith("Bearer")
    assert (f'error="{error}"' in r.headers["WWW-Authenticate"]) == bool(error)
    assert "gpuyard login --url URL --token-file FILE" in r.json()["detail"]


@pytest.mark.sqlite_only
def test_tokens_are_stored_only_as_hashes(world, tmp_path):
    secret = world.tokens["alice"]
    assert secret.startswith("gy_") and len(secret) > 40
    db = sqlite3.connect(tmp_path / "db" / "gpuyard.db")
    rows = db.execute("SELECT * FROM tokens").fetchall()
    dump = repr(rows)
    assert secret not in dump and secret[3:] not in dump
    assert hash_token(secret) in dump


def test_a_token_is_shown_once_then_works_and_can_be_revoked(world):
    made = world.call("alice", "POST", "/api/v1/users/alice/tokens", json={"name": "laptop"})
    assert made.status_code == 201
    token, token_id = made.json()["token"], made.json()["id"]
    listed = world.call("alice", "GET", "/api/v1/users/alice/tokens").json()["tokens"]
    assert token_id in {t["id"] for t in listed}
    assert token not in repr(listed) and all("token" not in t for t in listed)
    auth = {"Authorization": f"Bearer {token}"}
    assert world.client.get("/api/v1/whoami", headers=auth).json()["name"] == "alice"
    gone = world.call("alice", "DELETE", f"/api/v1/users/alice/tokens/{token_id}")
    assert gone.status_code == 200 and gone.json()["revokedAt"]
    r = world.client.get("/api/v1/whoami", headers=auth)
    assert r.status_code == 401 and "revoked" in r.json()["detail"]


def test_expired_tokens_are_refused(world):
    made = world.call("root", "POST", "/api/v1/users/bob/tokens", json={"expiresInDays": 1})
    auth = {"Authorization": f"Bearer {made.json()['token']}"}
    assert world.client.get("/api/v1/whoami", headers=auth).status_code == 200
    world.clock.advance(86400 + 1)
    r = world.client.get("/api/v1/whoami", headers=auth)
    assert r.status_code == 401 and "expired" in r.json()["detail"]


def test_whoami_names_roles(shared_world):
    me = shared_world.call("alice", "GET", "/api/v1/whoami").json()
    assert me["name"] == "alice" and me["role"] == "user" and me["admin"] is False
    assert me["memberships"] == [{"tenant": "red", "role": "member"}]
    assert shared_world.call("root", "GET", "/api/v1/whoami").json()["admin"] is True


def test_refusals_say_why(world):
    red = world.jobs["red"]
    r = world.call("amy", "POST", f"/api/v1/jobs/{red}/cancel")
    assert r.status_code == 403
    assert "it belongs to alice" in r.json()["detail"]
    r = world.call("vic", "GET", f"/api/v1/jobs/{red}/logs")
    assert "viewer of tenant red" in r.json()["detail"]
    r = world.submit("bob", "name: x\ntenant: red\ntaskRoles:\n  m:\n    command: 'true'\n")
    assert r.status_code == 403 and "not a member of tenant red" in r.json()["detail"]


def test_logs_and_list_show_the_owner(shared_world):
    red = shared_world.jobs["red"]
    assert (
        shared_world.call("alice", "GET", f"/api/v1/jobs/{red}/logs").text == "epoch 1\nepoch 2\n"
    )
    jobs = shared_world.call("root", "GET", "/api/v1/jobs").json()["jobs"]
    assert {j["tenant"]: j["owner"] for j in jobs} == {"red": "alice", "blue": "bob"}


def test_nodes_hide_the_jobs_of_other_tenants(shared_world):
    def holders(who):
        nodes = shared_world.call(who, "GET", "/api/v1/nodes").json()["nodes"]
        return {g["job"] for g in nodes[0]["gpus"] if g["busy"]}

    red, blue = shared_world.jobs["red"], shared_world.jobs["blue"]
    assert holders("root") == {red, blue}
    assert holders("alice") == {red, None}
    assert holders("bob") == {blue, None}
