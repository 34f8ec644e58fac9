"""The portal's after-submit controls over the real app (tests/web/test_routes.py's way):
hold and release on the job page (the scheduler leaves a held job), its priority, and a bulk
cancel on the jobs list that cancels what the user may and lists what was refused."""

from __future__ import annotations

from api.conftest import spec, world  # noqa: F401 - the fixture
from gpuyard.store import Membership, TenantRole
from web.test_routes import page, post


def submit(w, who: str, tenant: str, name: str) -> str:
    r = w.submit(who, spec(tenant, name))
    assert r.status_code == 201, r.text
    return r.json()["id"]


def test_hold_and_release_from_the_job_page(world):  # noqa: F811
    job = submit(world, "alice", "red", "held")
    html = page(world, "alice", "GET", f"/jobs/{job}").text
    assert 'id="hold"' in html and 'id="priority"' in html
    assert 'id="hold"' not in page(world, "amy", "GET", f"/jobs/{job}").text  # not hers
    assert post(world, "amy", f"/jobs/{job}/hold", {}).status_code == 403
    r = post(world, "alice", f"/jobs/{job}/hold", {})
    assert r.status_code == 303 and r.headers["location"] == f"/jobs/{job}"
    world.ctl.run_cycle()
    assert str(world.store.jobs.get(job).state) == "QUEUED"
    html = page(world, "alice", "GET", f"/jobs/{job}").text
    assert 'id="release"' in html and "held by alice" in html
    assert post(world, "alice", f"/jobs/{job}/release", {}).status_code == 303
    world.ctl.run_cycle()
    assert str(world.store.jobs.get(job).state) == "SCHEDULED"
    r = post(world, "alice", f"/jobs/{job}/hold", {})
    assert r.status_code == 409 and "only a queued job" in r.text


def test_priority_from_the_job_page(world):  # noqa: F811
    job = submit(world, "alice", "red", "p")
    assert post(world, "alice", f"/jobs/{job}/priority", {"priority": "-7"}).status_code == 303
    assert world.store.jobs.get(job).priority == -7
    r = post(world, "alice", f"/jobs/{job}/priority", {"priority": "9999"})
    assert r.status_code == 422 and "-1000 to 1000" in r.text
    assert post(world, "vic", f"/jobs/{job}/priority", {"priority": "1"}).status_code == 403
    assert world.store.jobs.get(job).priority == -7


def test_bulk_cancel_from_the_jobs_list(world):  # noqa: F811
    world.store.users.set_membership("alice", Membership("blue", TenantRole.VIEWER))
    mine = submit(world, "alice", "red", "mine")
    amys = submit(world, "amy", "red", "amys")
    bobs = submit(world, "bob", "blue", "bobs")
    html = page(world, "alice", "GET", "/jobs?state=QUEUED").text
    assert 'id="bulk-cancel"' in html
    assert 'id="bulk-cancel"' not in page(world, "alice", "GET", "/jobs?state=FAILED").text
    r = post(world, "alice", "/jobs/bulk/cancel", {"state": "QUEUED", "tenant": ""})
    assert r.status_code == 200, r.text
    assert "Cancelling 1 of 3 matching jobs" in r.text
    assert f"/jobs/{amys}" in r.text and "belongs to amy" in r.text
    assert "viewer of tenant blue" in r.text
    stops = {j: world.store.jobs.get(j).stop_requested for j in (mine, amys, bobs)}
    assert stops == {mine: "Cancelled", amys: None, bobs: None}
    r = post(world, "alice", "/jobs/bulk/cancel", {"state": "QUEUED"}, csrf=False)
    assert r.status_code == 403
