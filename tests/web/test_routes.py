"""The portal's routes over the real app (TestClient), in the API tests' world: log-in and
its cookie, the same authorisation as the API (404 pages for other tenants' jobs, 403 for
refused acts), the CSRF and origin checks, the spec checked while typed, and every page
rendered (no tracebacks)."""

from __future__ import annotations

import re

import pytest

from api.conftest import LOG, World, build_world, spec, world  # noqa: F401 - fixtures

ORIGIN = {"Origin": "http://testserver"}


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory):
    yield from build_world(tmp_path_factory.mktemp("web"))


def page(w: World, who: str, method: str, path: str, **kwargs):
    headers = {"Cookie": f"gpuyard_session={w.tokens[who]}", **kwargs.pop("headers", {})}
    return w.client.request(method, path, headers=headers, follow_redirects=False, **kwargs)


def csrf_of(w: World, who: str) -> str:
    html = page(w, who, "GET", "/submit").text
    return re.search(r'name="csrf" value="([0-9a-f]+)"', html).group(1)


def post(w: World, who: str, path: str, data: dict, csrf: bool = True):
    if csrf:
        data = {**data, "csrf": csrf_of(w, who)}
    return page(w, who, "POST", path, data=data, headers=ORIGIN)


# -- log in --------------------------------------------------------------------------------


def test_without_a_session_every_page_redirects_to_login(shared):
    assert shared.client.get("/", follow_redirects=False).headers["location"] == "/jobs"
    for path in ("/jobs", f"/jobs/{shared.jobs['red']}", "/submit", "/cluster", "/tenants"):
        r = shared.client.get(path, follow_redirects=False)
        assert r.status_code == 303, path
        assert r.headers["location"].startswith("/login"), path
    r = shared.client.get("/jobs", follow_redirects=False)
    assert r.headers["location"] == "/login?next=/jobs"


def test_htmx_fragments_without_a_session_ask_htmx_to_go_to_login(shared):
    r = shared.client.get("/jobs/table", headers={"HX-Request": "true"}, follow_redirects=False)
    assert r.status_code == 401
    assert r.headers["HX-Redirect"].startswith("/login")


def test_a_bad_session_cookie_is_dropped_with_the_reason(shared):
    r = shared.client.get(
        "/jobs", headers={"Cookie": "gpuyard_session=gy_nope"}, follow_redirects=False
    )
    assert r.status_code == 303
    assert "why=" in r.headers["location"]
    assert "gpuyard_session=" in r.headers["set-cookie"]  # deleted
    login = shared.client.get(r.headers["location"])
    assert "Your session ended: the API token is not valid" in login.text


def test_the_login_page_shows_no_text_a_link_made_up(shared):
    r = shared.client.get("/login?why=Send+your+token+to+evil.example")
    assert "evil.example" not in r.text


def test_login_sets_an_httponly_samesite_strict_cookie(shared):
    r = shared.client.post(
        "/login",
        data={"token": shared.tokens["alice"], "next": "/cluster"},
        headers=ORIGIN,
        follow_redirects=False,
    )
    assert r.status_code == 303
    assert r.headers["location"] == "/cluster"
    cookie = r.headers["set-cookie"].lower()
    assert "httponly" in cookie
    assert "samesite=strict" in cookie
    shared.client.cookies.clear()


def test_login_refuses_a_bad_token_with_the_apis_reason(shared):
    r = shared.client.post("/login", data={"token": "gy_wrong"}, headers=ORIGIN)
    assert r.status_code == 401
    assert "the token is unknown" in r.text
    assert "<form" in r.text


def test_login_follows_only_local_paths(shared):
    r = shared.client.post(
        "/login",
        data={"token": shared.tokens["alice"], "next": "//evil.example/x"},
        headers=ORIGIN,
        follow_redirects=False,
    )
    assert r.headers["location"] == "/jobs"
    shared.client.cookies.clear()


def test_a_cross_site_login_form_is_refused(shared):
    r = shared.client.post(
        "/login", data={"token": shared.tokens["alice"]}, headers={"Origin": "http://evil.example"}
    )
    assert r.status_code == 403
    assert "origin" in r.text
    assert "set-cookie" not in r.headers


# -- the same authorisation as the API -----------------------------------------------------


def test_a_member_lists_only_their_tenants_jobs(shared):
    html = page(shared, "alice", "GET", "/jobs").text
    assert shared.jobs["red"] in html
    assert shared.jobs["blue"] not in html
    admin = page(shared, "root", "GET", "/jobs/table").text
    assert shared.jobs["red"] in admin and shared.jobs["blue"] in admin


def test_another_tenants_job_is_a_404_page(shared):
    r = page(shared, "alice", "GET", f"/jobs/{shared.jobs['blue']}")
    assert r.status_code == 404
    assert r.headers["content-type"].startswith("text/html")
    assert "Not found" in r.text
    assert "Traceback" not in r.text


def test_an_unknown_job_is_the_same_404_page(shared):
    r = page(shared, "alice", "GET", "/jobs/j-does-not-exist")
    assert r.status_code == 404
    assert "Not found" in r.text


def test_the_job_page_shows_tasks_events_and_the_log(shared):
    job = shared.jobs["red"]
    html = page(shared, "alice", "GET", f"/jobs/{job}").text
    assert "main/0" in html
    assert "fake" in html  # the test node's GPUs are declared fake
    assert "QUEUED" in html and "SCHEDULED" in html  # the event timeline
    assert 'id="cancel"' in html
    log = page(shared, "alice", "GET", f"/jobs/{job}/log")
    assert log.status_code == 200
    assert LOG.decode().splitlines()[0] in log.text


def test_a_viewer_sees_the_job_but_not_its_log_nor_cancel(shared):
    job = shared.jobs["red"]
    html = page(shared, "vic", "GET", f"/jobs/{job}").text
    assert 'id="cancel"' not in html
    assert "not read its log" in html
    r = page(shared, "vic", "GET", f"/jobs/{job}/log")
    assert r.status_code == 403
    assert "viewer" in r.text


def test_cluster_and_tenants_pages_show_only_visible_things(shared):
    cluster = page(shared, "alice", "GET", "/cluster").text
    assert "GPU 0" in cluster and "fake" in cluster
    assert shared.jobs["red"] in cluster
    assert shared.jobs["blue"] not in cluster  # a busy GPU, its job not named
    tenants = page(shared, "alice", "GET", "/tenants").text
    assert "red" in tenants and ">blue<" not in tenants
    assert "A100-80GB" in tenants


def test_static_files_are_served(shared):
    assert shared.client.get("/static/htmx.min.js").status_code == 200
    assert "prefers-color-scheme" in shared.client.get("/static/portal.css").text


# -- submit --------------------------------------------------------------------------------


def test_validation_names_each_bad_field_by_its_path(shared):
    bad = "name: x\ntenant: red\ntaskRoles:\n  main:\n    gpuNumber: two\n    command: 'true'\n"
    r = post(shared, "alice", "/submit/validate", {"spec": bad})
    assert r.status_code == 200
    assert "taskRoles.main.gpuNumber" in r.text
    ok = post(shared, "alice", "/submit/validate", {"spec": spec("red")})
    assert "Valid" in ok.text


def test_validation_checks_the_right_to_submit_to_the_tenant(shared):
    r = post(shared, "bob", "/submit/validate", {"spec": spec("red")})
    assert "not a member of tenant red" in r.text
    r = post(shared, "vic", "/submit/validate", {"spec": spec("red")})
    assert "viewer" in r.text


def test_clone_prefills_the_spec_and_examples_load(shared):
    html = page(shared, "alice", "GET", f"/submit?clone={shared.jobs['red']}").text
    assert "red-job" in html and "tenant: red" in html
    assert page(shared, "alice", "GET", f"/submit?clone={shared.jobs['blue']}").status_code == 404
    example = page(shared, "alice", "GET", "/submit?example=hello.yaml").text
    assert "hello from gpuyard" in example


def test_submit_then_cancel_through_the_forms(world):  # noqa: F811 - the fixture
    r = post(world, "alice", "/submit", {"spec": spec("red", name="from-the-portal")})
    assert r.status_code == 303, r.text
    job_id = r.headers["location"].rsplit("/", 1)[1]
    record = world.store.jobs.get(job_id)
    assert record.name == "from-the-portal" and record.owner == "alice"
    assert post(world, "amy", f"/jobs/{job_id}/cancel", {}).status_code == 403
    assert post(world, "alice", f"/jobs/{job_id}/cancel", {}, csrf=False).status_code == 403
    r = post(world, "alice", f"/jobs/{job_id}/cancel", {})
    assert r.status_code == 303
    assert world.store.jobs.get(job_id).stop_requested == "Cancelled"


def test_a_bad_spec_is_not_submitted_and_keeps_the_text(world):  # noqa: F811
    r = post(world, "alice", "/submit", {"spec": "name: x\ntenant: red\n"})
    assert r.status_code == 422
    assert "taskRoles" in r.text
    assert "name: x" in r.text
