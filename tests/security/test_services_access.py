"""A job's web services are its tenant's code answering on the portal's origin: only who may
exec may open them (the job's owner, the tenant's admins, platform admins), a member of
another tenant gets exactly the 404 of a job that does not exist (and no stream is opened for
a refused caller), and the task never sees the caller's credentials — not the bearer token,
not the portal's cookie, not its CSRF token — nor may its answer plant the portal's cookie,
widen a service worker's scope, or run as another user on the portal's origin."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fake_streams import EchoServer, LoopbackStreams

SPEC = "name: svc\ntenant: red\nservices: {web: 8000}\ntaskRoles:\n  main:\n    command: sleep 1\n"


@pytest.fixture(scope="module")
def lab(shared_world, tmp_path_factory) -> Iterator[tuple[str, LoopbackStreams]]:
    streams = LoopbackStreams(tmp_path_factory.mktemp("tasks"))
    shared_world.engine.streams = lambda node: streams
    with EchoServer() as port:
        streams.ports[8000] = port
        job_id = shared_world.submit("alice", SPEC).json()["id"]
        shared_world.ctl.run_cycle()
        shared_world.engine.run(shared_world.engine.keys_on(job_id)[-1])
        shared_world.ctl.run_cycle()
        yield job_id, streams


def portal_get(world, who: str, path: str, **headers: str):
    world.client.cookies.set("gpuyard_session", world.tokens[who])
    try:
        return world.client.get(path, headers=headers)
    finally:
        world.client.cookies.clear()


def test_another_tenants_member_gets_the_404_of_no_job_through_either_door(shared_world, lab):
    job_id, streams = lab
    opened = len(streams.opened)
    api = shared_world.call("bob", "GET", f"/api/v1/jobs/{job_id}/services/web/")
    none = shared_world.call("bob", "GET", "/api/v1/jobs/000000000000/services/web/")
    assert api.status_code == none.status_code == 404
    assert api.json()["detail"].replace(job_id, "X") == none.json()["detail"].replace(
        "000000000000", "X")
    page = portal_get(shared_world, "bob", f"/jobs/{job_id}/services/web/")
    job_page = portal_get(shared_world, "bob", f"/jobs/{job_id}")
    assert page.status_code == job_page.status_code == 404
    assert page.text == job_page.text
    for who in ("vic", "amy"):
        assert shared_world.call(who, "GET", f"/api/v1/jobs/{job_id}/services/web/"
                                 ).status_code == 403
    assert len(streams.opened) == opened  # nothing reached the task


def test_the_task_never_sees_the_callers_credentials(shared_world, lab):
    job_id, _ = lab
    secret = shared_world.tokens["alice"]
    forged = {"x-forwarded-prefix": "/evil", "x-csrf-token": "csrf-value",
              "cookie": f"gpuyard_session={secret}; theme=dark"}
    r = shared_world.call("alice", "GET", f"/api/v1/jobs/{job_id}/services/web/", headers=forged)
    page = portal_get(shared_world, "alice", f"/jobs/{job_id}/services/web/",
                      **{"x-csrf-token": "csrf-value", "authorization": "Basic dXNlcjpwdw=="})
    for answer in (r, page):
        assert answer.status_code == 200, answer.text
        assert secret not in answer.text
        seen = answer.json()["headers"]
        names = [k for k, _ in seen]
        assert "authorization" not in names and "x-csrf-token" not in names
        assert [v for k, v in seen if k == "x-forwarded-prefix"] == [
            answer.url.path.rstrip("/")]
    assert dict(r.json()["headers"])["cookie"] == "theme=dark"


def test_the_answer_cannot_plant_the_portal_cookie_or_a_wide_service_worker(shared_world, lab):
    job_id, _ = lab
    page = portal_get(shared_world, "alice", f"/jobs/{job_id}/services/web/")
    cookies = page.headers.get_list("set-cookie")
    assert not [c for c in cookies if c.startswith("gpuyard_session")]
    assert all(f"Path=/jobs/{job_id}/services/web/" in c for c in cookies)
    assert "service-worker-allowed" not in page.headers


def test_someone_elses_service_runs_sandboxed_off_the_portals_origin(shared_world, lab):
    job_id, _ = lab
    own = portal_get(shared_world, "alice", f"/jobs/{job_id}/services/web/")
    boss = portal_get(shared_world, "redboss", f"/jobs/{job_id}/services/web/")
    assert "content-security-policy" not in own.headers
    policy = boss.headers["content-security-policy"]
    assert policy.startswith("sandbox") and "allow-same-origin" not in policy
