"""The authorisation matrix: every endpoint × every role × own/other tenant (and own/other
user's job), as status codes. The rules themselves are in `gpuyard.api.authz`."""

from __future__ import annotations

import pytest

from api.conftest import CALLERS, spec

# the rules are gpuyard.api.authz's, the same on either store: the store's own PostgreSQL
# tests are the API, controller and store suites (docs/postgresql.md)
pytestmark = pytest.mark.one_backend

ANON = {"anonymous": 401, "badtoken": 401}

# --- jobs: (status on the red job, status on the blue job) -------------------------------
# The red job belongs to alice (member of red); the blue job to bob (member of blue).
OK = "ok"
SEE = {
    "root": (OK, OK),
    "redboss": (OK, 404),
    "alice": (OK, 404),
    "amy": (OK, 404),
    "vic": (OK, 404),
    "bob": (404, OK),
}
ACT = {  # logs and cancel: own jobs, or all jobs of a tenant one administers
    "root": (OK, OK),
    "redboss": (OK, 404),
    "alice": (OK, 404),
    "amy": (403, 404),
    "vic": (403, 404),
    "bob": (404, OK),
}
JOB_ENDPOINTS = [
    # (name, method, path suffix, success status, rule)
    ("get", "GET", "", 200, SEE),
    ("events", "GET", "/events", 200, SEE),
    ("logs", "GET", "/logs", 200, ACT),
    ("cancel", "POST", "/cancel", 202, ACT),
]
READ_ONLY = {"GET"}


def world_for(request: pytest.FixtureRequest, method: str):
    """The shared world for reads, a fresh one for anything that writes."""
    return request.getfixturevalue("shared_world" if method in READ_ONLY else "world")


def _job_cases():
    for name, method, suffix, ok, rule in JOB_ENDPOINTS:
        for who in CALLERS:
            for i, tenant in enumerate(("red", "blue")):
                expected = ANON[who] if who in ANON else rule[who][i]
                expected = ok if expected == OK else expected
                yield pytest.param(
                    method, suffix, who, tenant, expected, id=f"{name}-{who}-{tenant}"
                )


@pytest.mark.parametrize(("method", "suffix", "who", "tenant", "expected"), list(_job_cases()))
def test_job_endpoints(request, method, suffix, who, tenant, expected):
    world = world_for(request, method)
    job_id = world.jobs[tenant]
    r = world.call(who, method, f"/api/v1/jobs/{job_id}{suffix}")
    assert r.status_code == expected, r.text
    if expected == 404:  # an invisible job reads exactly like a job that does not exist
        assert r.json() == {"detail": f"no job {job_id}"}


# --- submit: status per target tenant ----------------------------------------------------
SUBMIT = {
    "root": (201, 201, 422),
    "redboss": (201, 403, 422),
    "alice": (201, 403, 422),
    "amy": (201, 403, 422),
    "vic": (403, 403, 422),
    "bob": (403, 201, 422),
    "anonymous": (401, 401, 401),
    "badtoken": (401, 401, 401),
}


@pytest.mark.parametrize("who", CALLERS)
@pytest.mark.parametrize(("i", "tenant"), [(0, "red"), (1, "blue"), (2, "nowhere")])
def test_submit(world, who, i, tenant):
    r = world.submit(who, spec(tenant))
    assert r.status_code == SUBMIT[who][i], r.text
    if r.status_code == 201:
        assert world.store.jobs.get(r.json()["id"]).owner == who
    if r.status_code == 403:
        assert f"tenant {tenant}" in r.json()["detail"]
    if r.status_code == 422:
        assert [e["path"] for e in r.json()["errors"]] == ["tenant"]


# --- list: which jobs each caller sees ---------------------------------------------------
LISTED = {
    "root": {"red", "blue"},
    "redboss": {"red"},
    "alice": {"red"},
    "amy": {"red"},
    "vic": {"red"},
    "bob": {"blue"},
}


@pytest.mark.parametrize("who", CALLERS)
def test_list_shows_only_visible_jobs(shared_world, who):
    world = shared_world
    r = world.call(who, "GET", "/api/v1/jobs")
    if who in ANON:
        assert r.status_code == 401
        return
    assert r.status_code == 200
    assert {j["tenant"] for j in r.json()["jobs"]} == LISTED[who]
    other = world.call(who, "GET", "/api/v1/jobs", params={"tenant": "blue"}).json()["jobs"]
    assert {j["tenant"] for j in other} == LISTED[who] & {"blue"}


# --- everything else: one status per caller ----------------------------------------------
# columns: root, redboss, alice, amy, vic, bob, anonymous, badtoken
OTHER_ENDPOINTS = {
    "nodes": ("GET", "/api/v1/nodes", None, [200, 200, 200, 200, 200, 200, 401, 401]),
    "whoami": ("GET", "/api/v1/whoami", None, [200, 200, 200, 200, 200, 200, 401, 401]),
    "queue": ("GET", "/api/v1/queue", None, [200, 200, 200, 200, 200, 200, 401, 401]),
    "tenants-list": ("GET", "/api/v1/tenants", None, [200, 200, 200, 200, 200, 200, 401, 401]),
    "tenant-get-own": (
        "GET",
        "/api/v1/tenants/red",
        None,
        [200, 200, 200, 200, 200, 404, 401, 401],
    ),
    "tenant-create": (
        "POST",
        "/api/v1/tenants",
        {"name": "green"},
        [201, 403, 403, 403, 403, 403, 401, 401],
    ),
    "tenant-update": (
        "PATCH",
        "/api/v1/tenants/red",
        {"weight": 2},
        [200, 403, 403, 403, 403, 403, 401, 401],
    ),
    "members-list": (
        "GET",
        "/api/v1/tenants/red/members",
        None,
        [200, 200, 200, 200, 200, 404, 401, 401],
    ),
    "member-set": (
        "PUT",
        "/api/v1/tenants/red/members/bob",
        {"role": "viewer"},
        [204, 204, 403, 403, 403, 404, 401, 401],
    ),
    "member-remove": (
        "DELETE",
        "/api/v1/tenants/red/members/amy",
        None,
        [204, 204, 403, 403, 403, 404, 401, 401],
    ),
    "user-create": (
        "POST",
        "/api/v1/users",
        {"name": "carol"},
        [201, 403, 403, 403, 403, 403, 401, 401],
    ),
    "users-list": ("GET", "/api/v1/users", None, [200, 403, 403, 403, 403, 403, 401, 401]),
    "user-get-alice": (
        "GET",
        "/api/v1/users/alice",
        None,
        [200, 403, 200, 403, 403, 403, 401, 401],
    ),
    "token-create-alice": (
        "POST",
        "/api/v1/users/alice/tokens",
        {"name": "laptop"},
        [201, 403, 201, 403, 403, 403, 401, 401],
    ),
    "tokens-list-alice": (
        "GET",
        "/api/v1/users/alice/tokens",
        None,
        [200, 403, 200, 403, 403, 403, 401, 401],
    ),
}


def _other_cases():
    for name, (method, path, body, statuses) in OTHER_ENDPOINTS.items():
        for who, status in zip(CALLERS, statuses, strict=True):
            yield pytest.param(method, path, body, who, status, id=f"{name}-{who}")


@pytest.mark.parametrize(("method", "path", "body", "who", "expected"), list(_other_cases()))
def test_other_endpoints(request, method, path, body, who, expected):
    world = world_for(request, method)
    r = world.call(who, method, path, json=body)
    assert r.status_code == expected, r.text


def test_public_endpoints_need_no_token(shared_world):
    world = shared_world
    assert world.client.get("/healthz").status_code == 200
    assert world.client.get("/docs").status_code == 200
    assert world.client.get("/openapi.json").status_code == 200
