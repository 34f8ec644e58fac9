"""A job's web services through the platform (docs/services.md), on the fake engine with
port streams to a loopback echo server (tests/fake_streams.py): the request the task gets, the
answer the browser gets, who may open a service, and the errors that say why not."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fake_streams import EchoServer, LoopbackStreams

SPEC = """name: lab
tenant: red
services:
  web: 8000
  raw: {port: 8000, stripPrefix: false}
  shut: 9999
taskRoles:
  main:
    command: sleep 100
"""


@pytest.fixture(scope="module")
def lab(shared_world, tmp_path_factory) -> Iterator[str]:
    streams = LoopbackStreams(tmp_path_factory.mktemp("tasks"))
    shared_world.engine.streams = lambda node: streams
    with EchoServer() as port:
        streams.ports[8000] = port
        r = shared_world.submit("alice", SPEC)
        assert r.status_code == 201, r.text
        job_id = r.json()["id"]
        shared_world.ctl.run_cycle()
        shared_world.engine.run(shared_world.engine.keys_on(job_id)[-1])
        shared_world.ctl.run_cycle()
        yield job_id


def api(job_id: str, name: str = "web", path: str = "") -> str:
    return f"/api/v1/jobs/{job_id}/services/{name}/{path}"


def seen_headers(r) -> dict[str, str]:
    return dict(r.json()["headers"])


def test_the_owner_reaches_the_app_below_the_prefix(shared_world, lab):
    r = shared_world.call("alice", "GET", api(lab, path="a/b?x=1"))
    assert r.status_code == 200, r.text
    assert r.json()["path"] == "/a/b?x=1"
    headers = seen_headers(r)
    assert headers["x-forwarded-prefix"] == f"/api/v1/jobs/{lab}/services/web"
    assert "authorization" not in headers
    assert headers["connection"] == "close"
    assert "content-security-policy" not in r.headers  # the owner's own page
    assert "service-worker-allowed" not in r.headers


def test_without_strip_prefix_the_app_gets_its_base_url(shared_world, lab):
    r = shared_world.call("alice", "GET", api(lab, "raw", "tree"))
    assert r.json()["path"] == f"/jobs/{lab}/services/raw/tree"


def test_a_body_is_forwarded_whole(shared_world, lab):
    r = shared_world.call("alice", "POST", api(lab, path="save"), content=b"x" * 100_000)
    assert r.status_code == 200
    assert r.json()["body"] == "x" * 100_000

    def chunks():
        yield b"one,"
        yield b"two"

    r = shared_world.call("alice", "PUT", api(lab, path="put"), content=chunks())
    assert r.json()["body"] == "one,two"


def test_the_portal_door_takes_the_session_cookie_and_keeps_the_apps_cookies(shared_world, lab):
    cookies = {"gpuyard_session": shared_world.tokens["alice"], "_xsrf": "abc"}
    shared_world.client.cookies.update(cookies)
    try:
        r = shared_world.client.get(f"/jobs/{lab}/services/web/index.html")
    finally:
        shared_world.client.cookies.clear()
    assert r.status_code == 200, r.text
    headers = seen_headers(r)
    assert headers["cookie"] == "_xsrf=abc"
    assert headers["x-forwarded-prefix"] == f"/jobs/{lab}/services/web"
    set_cookies = r.headers.get_list("set-cookie")
    assert set_cookies == [f"app=1; Path=/jobs/{lab}/services/web/"]


def test_the_portal_door_without_a_slash_redirects_below_the_prefix(shared_world, lab):
    shared_world.client.cookies.set("gpuyard_session", shared_world.tokens["alice"])
    try:
        r = shared_world.client.get(f"/jobs/{lab}/services/web", follow_redirects=False)
    finally:
        shared_world.client.cookies.clear()
    assert r.status_code == 307
    assert r.headers["location"] == f"/jobs/{lab}/services/web/"


def test_the_portal_door_without_a_session_asks_to_log_in(shared_world, lab):
    r = shared_world.client.get(f"/jobs/{lab}/services/web/", follow_redirects=False)
    assert r.status_code == 303
    assert r.headers["location"].startswith("/login?next=")


def test_an_admin_opening_someone_elses_service_gets_a_sandboxed_page(shared_world, lab):
    for who in ("redboss", "root"):
        r = shared_world.call(who, "GET", api(lab))
        assert r.status_code == 200
        assert r.headers["content-security-policy"].startswith("sandbox allow-scripts")


@pytest.mark.parametrize(("who", "status"), [("amy", 403), ("vic", 403), ("bob", 404),
                                             ("anonymous", 401)])
def test_who_may_not_open_it_is_refused(shared_world, lab, who, status):
    r = shared_world.call(who, "GET", api(lab))
    assert r.status_code == status, r.text
    if who == "bob":
        missing = shared_world.call("bob", "GET", api("j-nonexistent"))
        assert r.json() == {"detail": f"no job {lab}"}
        assert missing.json() == {"detail": "no job j-nonexistent"}


def test_an_undeclared_service_is_a_404(shared_world, lab):
    r = shared_world.call("alice", "GET", api(lab, "nope"))
    assert r.status_code == 404
    assert r.json()["detail"] == f"job {lab} has no service nope"


def test_a_closed_port_is_a_502_that_says_why(shared_world, lab):
    r = shared_world.call("alice", "GET", api(lab, "shut"))
    assert r.status_code == 502
    assert "nothing listens there" in r.json()["detail"]
    shared_world.client.cookies.set("gpuyard_session", shared_world.tokens["alice"])
    try:
        page = shared_world.client.get(f"/jobs/{lab}/services/shut/")
    finally:
        shared_world.client.cookies.clear()
    assert page.status_code == 502
    assert "nothing listens there" in page.text and "<html" in page.text.lower()


def test_a_job_that_does_not_run_is_a_503(shared_world, lab):
    r = shared_world.submit("alice", SPEC.replace("name: lab", "name: later")
                            .replace("sleep 100", "sleep 1") + "    gpuNumber: 64\n")
    assert r.status_code == 201, r.text
    queued = r.json()["id"]
    answer = shared_world.call("alice", "GET", api(queued))
    assert answer.status_code == 503
    assert answer.json()["detail"] == f"job {queued} is queued: its services answer while it runs"


def test_opening_a_service_is_an_event_once(shared_world, lab):
    for _ in range(2):
        shared_world.call("alice", "GET", api(lab, path="again"))
    events = shared_world.call("root", "GET", f"/api/v1/jobs/{lab}/events").json()["events"]
    opened = [e["message"] for e in events if e["reason"] == "Service"]
    assert opened.count("alice opened service web (port 8000 of main/0)") == 1


def test_the_job_page_links_the_services_for_whoever_may_open_them(shared_world, lab):
    def page(who: str) -> str:
        shared_world.client.cookies.set("gpuyard_session", shared_world.tokens[who])
        try:
            return shared_world.client.get(f"/jobs/{lab}").text
        finally:
            shared_world.client.cookies.clear()

    link = f'href="/jobs/{lab}/services/web/"'
    assert link in page("alice")
    assert link in page("redboss")
    assert link not in page("vic")
