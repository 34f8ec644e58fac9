"""A path no route has is a 404 with the API's error body (`{"detail"}`), whatever the method
and whoever asks; a path that exists, asked with a method it does not take, is a 405 naming
every method it takes (`Allow`); OPTIONS answers those methods on a path that exists, 404 on
one that does not, the static files' included. (The app's OPTIONS route matches every path,
so Starlette said 405 "allowed: None" for every unknown path; OPTIONS of a static file was a
405 whose `Allow` named OPTIONS.)"""

from __future__ import annotations

import pytest

UNKNOWN = ["/api/v1/nope", "/nope", "/api/v1/jobs/abc/nope", "/api/v2", "/jobs/abc/nope/x"]


def assert_no_path(r, path: str) -> None:
    assert r.status_code == 404, (path, r.status_code, r.text)
    assert r.json() == {"detail": f"no such path: {path} (the API's paths: /docs)"}
    assert "allow" not in r.headers


@pytest.mark.parametrize("path", UNKNOWN)
@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "PATCH", "DELETE"])
def test_an_unknown_path_is_a_404_whatever_the_method(shared_world, path, method):
    assert_no_path(shared_world.call("alice", method, path), path)


@pytest.mark.parametrize("who", ["anonymous", "badtoken", "root"])
def test_an_unknown_path_is_a_404_whoever_asks(shared_world, who):
    assert_no_path(shared_world.call(who, "GET", "/api/v1/nope"), "/api/v1/nope")


def test_head_and_options_of_an_unknown_path_are_404s(shared_world):
    assert shared_world.call("alice", "HEAD", "/api/v1/nope").status_code == 404
    assert_no_path(shared_world.call("alice", "OPTIONS", "/api/v1/nope"), "/api/v1/nope")


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("PUT", "/api/v1/jobs", "GET, POST, OPTIONS"),
        ("DELETE", "/api/v1/jobs/abc", "GET, OPTIONS"),
        ("GET", "/api/v1/jobs/abc/cancel", "POST, OPTIONS"),
        ("POST", "/healthz", "GET, OPTIONS"),
        ("POST", "/static/portal.css", "GET, HEAD, OPTIONS"),
    ],
)
def test_a_known_path_with_another_method_is_a_405_with_allow(shared_world, method, path, allowed):
    r = shared_world.call("alice", method, path)
    assert r.status_code == 405, r.text
    assert r.headers["allow"] == allowed
    assert r.json() == {"detail": f"{method} is not allowed here; allowed: {allowed}"}
    options = shared_world.call("alice", "OPTIONS", path)
    assert (options.status_code, options.headers["allow"]) == (200, allowed)


def test_known_paths_still_answer(shared_world):
    assert shared_world.call("alice", "GET", "/api/v1/jobs").status_code == 200
    assert shared_world.call("anonymous", "GET", "/healthz").status_code == 200
    job = shared_world.jobs["red"]
    assert shared_world.call("alice", "GET", f"/api/v1/jobs/{job}").status_code == 200
