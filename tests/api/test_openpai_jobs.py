"""OpenPAI jobs through the API: warnings become events, the original document comes back."""

from __future__ import annotations

import json

import pytest

from gpuyard.spec.notices import EVENT_REASON
from gpuyard.spec.registryauth import job_logins

TOKEN = "pai-token-of-alice"
PASSWORD = "registry-password-of-alice"

DOCUMENT = {
    "protocolVersion": 2,
    "name": "pai-original",
    "type": "job",
    "defaults": {"virtualCluster": "red"},
    "secrets": {"token": TOKEN, "pw": PASSWORD},
    "prerequisites": [
        {
            "name": "img",
            "type": "dockerimage",
            "uri": "busybox:1",
            "auth": {"username": "alice", "password": "<% $secrets.pw %>"},
        }
    ],
    "taskRoles": {
        "main": {
            "dockerImage": "img",
            "resourcePerInstance": {"cpu": 1, "memoryMB": 256, "gpu": 0},
            "commands": ["echo <% $secrets.token %>"],
        }
    },
    "extras": {"hivedScheduler": {"taskRoles": {"main": {"reservationId": "r1"}}}},
}


@pytest.fixture(scope="module")
def job_id(shared_world) -> str:
    r = shared_world.call(
        "alice",
        "POST",
        "/api/v1/jobs",
        content=json.dumps(DOCUMENT),
        headers={"Content-Type": "application/json"},
    )
    assert r.status_code == 201, r.text
    return r.json()["id"]


def test_each_warning_is_an_event_naming_its_field(shared_world, job_id):
    r = shared_world.call("alice", "GET", f"/api/v1/jobs/{job_id}/events")
    warnings = [e["message"] for e in r.json()["events"] if e["reason"] == EVENT_REASON]
    assert not any(m.startswith("prerequisites[0].auth") for m in warnings), warnings
    reservation = "extras.hivedScheduler.taskRoles.main.reservationId: reservations are not"
    assert any(m.startswith(reservation) for m in warnings), warnings


def test_the_owner_gets_the_original_back_and_it_resubmits(shared_world, job_id):
    r = shared_world.call("alice", "GET", f"/api/v1/jobs/{job_id}/original")
    assert r.status_code == 200, r.text
    # the registry password (the secret its auth names) for no one, the owner included
    secrets = {"token": TOKEN, "pw": "<redacted>"}
    auth = {"username": "alice", "password": "<redacted>"}
    prerequisite = {**DOCUMENT["prerequisites"][0], "auth": auth}
    shown = {**DOCUMENT, "secrets": secrets, "prerequisites": [prerequisite]}
    assert r.json() == {"format": "openpai", "document": shown}
    assert PASSWORD not in r.text
    again = shared_world.call(
        "alice", "POST", "/api/v1/jobs", content=json.dumps(r.json()["document"]),
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    assert again.status_code == 201, again.text


def test_a_viewer_gets_the_original_with_its_secrets_redacted(shared_world, job_id):
    r = shared_world.call("vic", "GET", f"/api/v1/jobs/{job_id}/original")
    assert r.status_code == 200, r.text
    document = r.json()["document"]
    assert document["secrets"] == {"token": "<redacted>", "pw": "<redacted>"}
    assert document["prerequisites"][0]["auth"]["password"] == "<redacted>"
    assert TOKEN not in r.text and PASSWORD not in r.text


def test_a_job_in_our_format_gives_its_spec(shared_world):
    body = {"name": "ours", "tenant": "red", "taskRoles": {"m": {"command": "true"}}}
    r = shared_world.call("alice", "POST", "/api/v1/jobs", json=body)
    assert r.status_code == 201, r.text
    original = shared_world.call("alice", "GET", f"/api/v1/jobs/{r.json()['id']}/original")
    assert original.json()["format"] == "gpuyard"
    assert original.json()["document"]["name"] == "ours"


def test_someone_outside_the_tenant_gets_no_original(shared_world, job_id):
    r = shared_world.call("bob", "GET", f"/api/v1/jobs/{job_id}/original")
    assert r.status_code in (403, 404), r.text


def test_the_owner_resubmits_with_the_stored_login_and_no_one_else_may(shared_world, job_id):
    """Resubmit carries the registry login forward for its owner only: a tenant admin, who may
    read the job's other secrets, would otherwise pull with alice's login."""
    r = shared_world.call("alice", "POST", f"/api/v1/jobs/{job_id}/resubmit")
    assert r.status_code == 201, r.text
    again = shared_world.store.jobs.get(r.json()["id"])
    (login,) = job_logins(again.original)
    assert (login.registry, login.username, login.password) == ("docker.io", "alice", PASSWORD)
    for who in ("redboss", "root"):
        refused = shared_world.call(who, "POST", f"/api/v1/jobs/{job_id}/resubmit")
        assert refused.status_code == 403, refused.text
        assert "registry login" in refused.json()["detail"] and PASSWORD not in refused.text
