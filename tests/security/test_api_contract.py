"""The API's contract holds against hostile bodies (issue 15, item 8): a bool where a number
is expected is a 422, not 0 (`"deadline": false` drained a node at once); an integer past
Python's int-text limit is a 422, not a 500; the OpenAPI document describes the error bodies
actually sent; OPTIONS and a 405 name every method a path allows."""

from __future__ import annotations

import json

import pytest

HUGE = "9" * 5000


def post_json(w, path: str, body: str, who: str = "root"):
    return w.call(who, "POST", path, content=body, headers={"Content-Type": "application/json"})


def error_paths(r) -> list[str]:
    assert r.status_code == 422, r.text
    return [e["path"] for e in r.json()["errors"]]


@pytest.mark.parametrize("deadline", [False, True, 1.5, [], {}])
def test_a_drain_deadline_that_is_no_duration_is_a_422_and_nothing_drains(world, deadline):
    r = world.call("root", "POST", "/api/v1/nodes/n1/drain", json={"deadline": deadline})
    assert error_paths(r) == ["body.deadline"]
    node = world.call("root", "GET", "/api/v1/nodes").json()["nodes"][0]
    assert node["state"] == "ready"  # not draining, let alone past its deadline
    assert world.store.nodes.cordons() == {}


@pytest.mark.parametrize("deadline", [10**300, "99999999999999d", -1])
def test_a_drain_deadline_out_of_range_is_a_422(shared_world, deadline):
    r = shared_world.call("root", "POST", "/api/v1/nodes/n1/drain", json={"deadline": deadline})
    assert error_paths(r) == ["deadline"]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/v1/nodes/n1/drain", f'{{"deadline": {HUGE}}}'),
        ("/api/v1/tenants", f'{{"name": "big", "weight": {HUGE}}}'),
        ("/api/v1/users/root/tokens", f'{{"expiresInDays": {HUGE}}}'),
    ],
)
def test_a_json_body_with_an_integer_of_5000_digits_is_a_422(shared_world, path, body):
    assert error_paths(post_json(shared_world, path, body)) == ["body"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("weight", True),
        ("maxGpusPerUser", False),
        ("preemptionGraceS", True),
        ("allowRoot", 1),
        ("weight", float("nan")),
        ("preemptionGraceS", 10**300),
    ],
)
def test_a_tenant_number_that_is_a_bool_or_out_of_range_is_a_422(shared_world, field, value):
    r = post_json(shared_world, "/api/v1/tenants", json.dumps({"name": "t", field: value}))
    assert error_paths(r) == [field]


def test_a_token_expiry_of_true_is_a_422(shared_world):
    r = post_json(shared_world, "/api/v1/users/root/tokens", '{"expiresInDays": true}')
    assert error_paths(r) == ["body.expiresInDays"]


def test_a_user_admin_flag_that_is_not_a_boolean_is_a_422(shared_world):
    r = post_json(shared_world, "/api/v1/users", '{"name": "eve", "admin": "false"}')
    assert error_paths(r) == ["body.admin"]


def test_the_openapi_document_describes_the_error_bodies_sent(shared_world):
    doc = shared_world.client.get("/openapi.json").json()
    schemas = doc["components"]["schemas"]
    assert "HTTPValidationError" not in schemas  # FastAPI's, not what we send
    assert set(schemas["InvalidOut"]["required"]) == {"detail", "errors"}
    assert set(schemas["FieldErrorOut"]["properties"]) == {"path", "message"}
    assert set(schemas["ErrorOut"]["properties"]) == {"detail"}
    for path, operations in doc["paths"].items():
        for method, op in operations.items():
            for code, answer in op["responses"].items():
                if code.startswith(("4", "5")):
                    ref = answer["content"]["application/json"]["schema"]["$ref"]
                    want = "InvalidOut" if code == "422" else "ErrorOut"
                    assert ref.endswith(f"/{want}"), (method, path, code)
    submit = doc["paths"]["/api/v1/jobs"]["post"]["responses"]
    assert {"401", "403", "413", "422"} <= set(submit)


def test_a_422_has_the_documented_shape(shared_world):
    r = post_json(shared_world, "/api/v1/nodes/n1/drain", '{"deadline": false}')
    assert r.status_code == 422
    body = r.json()
    assert set(body) == {"detail", "errors"}
    assert all(set(e) == {"path", "message"} for e in body["errors"])


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("/api/v1/jobs", "GET, POST, OPTIONS"),
        ("/api/v1/jobs/abc", "GET, OPTIONS"),
        ("/api/v1/jobs/abc/cancel", "POST, OPTIONS"),
        ("/api/v1/tenants/red", "GET, PATCH, OPTIONS"),
        ("/api/v1/tenants/red/members/alice", "PUT, DELETE, OPTIONS"),
    ],
)
def test_options_and_405_name_every_allowed_method(shared_world, path, allowed):
    r = shared_world.call("alice", "OPTIONS", path)
    assert r.status_code == 200
    assert r.headers["allow"] == allowed
    other = "PUT" if "PUT" not in allowed else "POST"
    r = shared_world.call("alice", other, path)
    assert r.status_code == 405
    assert r.headers["allow"] == allowed
    assert set(r.json()) == {"detail"}


def test_options_on_no_path_is_a_404(shared_world):
    assert shared_world.call("alice", "OPTIONS", "/api/v1/nothing-here").status_code == 404
