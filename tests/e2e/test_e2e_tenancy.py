"""Two users in two tenants on the real server: neither sees nor touches the other's jobs."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.container]

SLEEPER = "name: sleeper\ntenant: {tenant}\ntaskRoles:\n  main:\n    command: sleep 300\n"


def make_user(server, name: str, tenant: str) -> str:
    r = server.http.post("/api/v1/users", json={"name": name, "memberships": [{"tenant": tenant}]})
    assert r.status_code == 201, r.text
    r = server.http.post(f"/api/v1/users/{name}/tokens", json={"name": "e2e"})
    assert r.status_code == 201, r.text
    return r.json()["token"]


def test_a_user_of_another_tenant_cannot_see_or_cancel_a_job(server):
    r = server.http.post("/api/v1/tenants", json={"name": "team-b"})
    assert r.status_code == 201, r.text
    alice = server.as_user(make_user(server, "alice", "default"))
    bob = server.as_user(make_user(server, "bob", "team-b"))
    r = alice.post(
        "/api/v1/jobs",
        content=SLEEPER.format(tenant="default"),
        headers={"Content-Type": "application/yaml"},
    )
    assert r.status_code == 201, r.text
    jid = r.json()["id"]
    server.wait(jid, {"RUNNING"})

    assert bob.get(f"/api/v1/jobs/{jid}").status_code == 404
    assert bob.get(f"/api/v1/jobs/{jid}/logs").status_code == 404
    assert bob.post(f"/api/v1/jobs/{jid}/cancel").status_code == 404
    assert bob.get("/api/v1/jobs").json()["jobs"] == []
    r = bob.post(
        "/api/v1/jobs",
        content=SLEEPER.format(tenant="default"),
        headers={"Content-Type": "application/yaml"},
    )
    assert r.status_code == 403 and "tenant default" in r.json()["detail"]
    assert server.job(jid)["state"] == "RUNNING"

    assert [j["id"] for j in alice.get("/api/v1/jobs").json()["jobs"]] == [jid]
    assert alice.post(f"/api/v1/jobs/{jid}/cancel").status_code == 202
    assert server.wait(jid, timeout=30)["state"] == "STOPPED"
    assert (
        server.http.get("/api/v1/jobs", params={"tenant": "default"}).json()["jobs"][0]["owner"]
        == "alice"
    )
    alice.close()
    bob.close()


def test_without_a_token_the_server_says_how_to_log_in(server):
    r = server.http.get("/api/v1/jobs", headers={"Authorization": ""})
    assert r.status_code == 401 and "gpuyard login" in r.json()["detail"]
    assert r.headers["WWW-Authenticate"].startswith("Bearer")
