"""After-submit control on the real app (tests/api/conftest.py's world: the real controller
on the fake engine, two tenants, users in every role): the list's filters and cursor, the
bulk cancel with its refusals, resubmit with overrides, hold and release as the scheduler
sees them, and who may change a job's priority."""

from __future__ import annotations

import pytest

from api.conftest import spec
from gpuyard.store import Membership, TenantRole

JOBS = "/api/v1/jobs"
#: who may hold, release and reprioritise alice's job in red: as who may cancel it
RIGHTS = [("alice", 200), ("redboss", 200), ("root", 200), ("amy", 403), ("vic", 403), ("bob", 404)]


def submit(world, who: str, tenant: str, name: str, extra: str = "") -> str:
    r = world.submit(who, spec(tenant, name=name, extra=extra))
    assert r.status_code == 201, r.text
    return r.json()["id"]


def ids(r) -> list[str]:
    assert r.status_code == 200, r.text
    return [j["id"] for j in r.json()["jobs"]]


def finish(world, job_id: str) -> None:
    """The job's tasks exit 0 on the fake engine; the next cycle ends the job."""
    for key in world.engine.keys_on(job_id):
        world.engine.exit(key, 0, "Completed")
    world.ctl.run_cycle()


def events(world, job_id: str) -> list[tuple[str, str]]:
    r = world.call("root", "GET", f"{JOBS}/{job_id}/events")
    return [(e["reason"], e["message"]) for e in r.json()["events"]]


# -- the list: filters and cursor ------------------------------------------------------


@pytest.fixture
def many(world):
    """red: alice's train-0..4 and amy's eval-0..1, submitted a minute apart after the
    world's own jobs (red-job, blue-job), none scheduled."""
    world.made = {}
    for i in range(5):
        world.clock.advance(60)
        world.made[f"train-{i}"] = submit(world, "alice", "red", f"train-{i}")
    for i in range(2):
        world.clock.advance(60)
        world.made[f"eval-{i}"] = submit(world, "amy", "red", f"eval-{i}")
    return world


def test_filters_by_user_name_state_tenant_and_since(many):
    made = many.made
    r = many.call("redboss", "GET", JOBS, params={"user": "amy"})
    assert ids(r) == [made["eval-1"], made["eval-0"]]
    r = many.call("redboss", "GET", JOBS, params={"name": "TRAIN-?"})  # any case
    assert ids(r) == [made[f"train-{i}"] for i in (4, 3, 2, 1, 0)]
    r = many.call("redboss", "GET", JOBS, params={"name": "*-1"})
    assert set(ids(r)) == {made["train-1"], made["eval-1"]}
    r = many.call("root", "GET", JOBS, params={"state": "scheduled"})
    assert set(ids(r)) == {many.jobs["red"], many.jobs["blue"]}
    r = many.call("root", "GET", JOBS, params={"since": "90s"})  # the last two, 60 s apart
    assert ids(r) == [made["eval-1"], made["eval-0"]]
    r = many.call("bob", "GET", JOBS, params={"user": "alice"})  # not bob's tenant: nothing
    assert ids(r) == []
    r = many.call("alice", "GET", JOBS, params={"tenant": "blue"})
    assert ids(r) == []


def test_a_glob_matches_percent_and_underscore_literally(world):
    odd = submit(world, "alice", "red", "a_b")
    submit(world, "alice", "red", "axb")
    assert ids(world.call("alice", "GET", JOBS, params={"name": "a_b"})) == [odd]


def test_the_cursor_walks_every_page_once(many):
    seen, cursor, pages = [], None, 0
    while True:
        params = {"tenant": "red", "limit": 3} | ({"cursor": cursor} if cursor else {})
        r = many.call("alice", "GET", JOBS, params=params)
        seen += ids(r)
        pages += 1
        cursor = r.json()["nextCursor"]
        if cursor is None:
            break
        submit(many, "alice", "red", "late")  # newer jobs do not shift the pages
    every = ids(many.call("alice", "GET", JOBS, params={"tenant": "red", "limit": 1000}))
    assert pages == 3
    assert seen == [j for j in every if j in seen] and len(seen) == 8 == len(set(seen))


@pytest.mark.parametrize(
    ("params", "path"),
    [
        ({"cursor": "bm9wZQ"}, "query.cursor"),
        ({"cursor": "!!"}, "query.cursor"),
        ({"since": "yesterday"}, "query.since"),
        ({"state": "DONE"}, "query.state.0"),
    ],
)
def test_bad_filters_are_422_with_the_path(world, params, path):
    r = world.call("alice", "GET", JOBS, params=params)
    assert r.status_code == 422, r.text
    assert [e["path"] for e in r.json()["errors"]] == [path]


# -- bulk cancel -------------------------------------------------------------------------


@pytest.fixture
def mixed(world):
    """alice: member of red, viewer of blue (another tenant's job she sees but may not
    cancel); all jobs named sweep-*."""
    world.store.users.set_membership("alice", Membership("blue", TenantRole.VIEWER))
    world.sweep = {
        who: submit(world, who, tenant, f"sweep-{who}")
        for who, tenant in (("alice", "red"), ("amy", "red"), ("bob", "blue"))
    }
    world.other = submit(world, "alice", "red", "other")
    return world


def test_bulk_cancel_cancels_what_it_may_and_refuses_the_rest(mixed):
    body = {"name": "sweep-*", "dryRun": True}
    dry = mixed.call("alice", "POST", f"{JOBS}/bulk/cancel", json=body).json()
    assert dry["matched"] == 3 and dry["cancelled"] == [mixed.sweep["alice"]]
    assert mixed.store.jobs.get(mixed.sweep["alice"]).stop_requested is None  # a dry run

    r = mixed.call("alice", "POST", f"{JOBS}/bulk/cancel", json={"name": "sweep-*"})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["cancelled"] == [mixed.sweep["alice"]] and out["dryRun"] is False
    refused = {x["id"]: x["reason"] for x in out["refused"]}
    assert set(refused) == {mixed.sweep["amy"], mixed.sweep["bob"]}
    assert "belongs to amy" in refused[mixed.sweep["amy"]]
    assert "viewer of tenant blue" in refused[mixed.sweep["bob"]]
    asked = {who: mixed.store.jobs.get(j).stop_requested for who, j in mixed.sweep.items()}
    assert asked == {"alice": "Cancelled", "amy": None, "bob": None}
    assert mixed.store.jobs.get(mixed.other).stop_requested is None  # no match, untouched
    mixed.ctl.run_cycle()
    assert str(mixed.store.jobs.get(mixed.sweep["alice"]).state) == "STOPPED"  # still queued
    assert ("CancelRequested", "cancel asked by alice") in events(mixed, mixed.sweep["alice"])


def test_bulk_cancel_by_tenant_admin_and_invisible_jobs(mixed):
    out = mixed.call("redboss", "POST", f"{JOBS}/bulk/cancel", json={"user": "bob"}).json()
    assert out == {"matched": 0, "cancelled": [], "refused": [], "dryRun": False, "more": False}
    out = mixed.call("redboss", "POST", f"{JOBS}/bulk/cancel", json={"state": ["QUEUED"]}).json()
    assert set(out["cancelled"]) == {mixed.sweep["alice"], mixed.sweep["amy"], mixed.other}
    again = mixed.call("redboss", "POST", f"{JOBS}/bulk/cancel", json={"state": ["QUEUED"]}).json()
    assert again["matched"] == 0  # already asked: not matched twice


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({}, "body"),
        ({"dryRun": True}, "body"),
        ({"state": ["SUCCEEDED"]}, "body.state"),
        ({"name": 3}, "body.name"),
        ({"user": "x", "extra": 1}, "body.extra"),
        ({"since": "soon"}, "body.since"),
        ({"user": "x", "dryRun": "yes"}, "body.dryRun"),
    ],
)
def test_bad_bulk_cancels_are_422_with_the_path(world, body, path):
    r = world.call("alice", "POST", f"{JOBS}/bulk/cancel", json=body)
    assert r.status_code == 422, r.text
    assert path in [e["path"] for e in r.json()["errors"]]


# -- resubmit --------------------------------------------------------------------------


def test_resubmit_with_overrides_as_the_caller(world):
    old = world.jobs["red"]
    r = world.call(
        "amy", "POST", f"{JOBS}/{old}/resubmit",
        json={"set": {"taskRoles.main.gpuNumber": 2, "name": "again", "priority": 7}},
    )  # fmt: skip
    assert r.status_code == 201, r.text
    new = r.json()["id"]
    assert r.headers["Location"] == f"{JOBS}/{new}"
    job = world.call("amy", "GET", f"{JOBS}/{new}").json()
    assert (job["name"], job["owner"], job["gpus"], job["priority"]) == ("again", "amy", 2, 7)
    assert job["spec"]["taskRoles"]["main"]["command"] == "true"  # the rest as it was
    assert any(r == "Resubmitted" and old in m for r, m in events(world, new))
    assert any(r == "Resubmitted" and new in m and "amy" in m for r, m in events(world, old))


@pytest.mark.parametrize(
    ("sets", "path", "words"),
    [
        (
            {"taskRoles.mian.gpuNumber": 1},
            "body.set.taskRoles.mian.gpuNumber",
            "has no field 'mian'",
        ),
        ({"name.first": 1}, "body.set.name.first", "is a str"),
        ({"a..b": 1}, "body.set.a..b", "dotted path"),
        ({"taskRoles.main.gpuNumber": -1}, "taskRoles.main.gpuNumber", ""),
    ],
)
def test_resubmit_names_a_bad_path(world, sets, path, words):
    r = world.call("alice", "POST", f"{JOBS}/{world.jobs['red']}/resubmit", json={"set": sets})
    assert r.status_code == 422, r.text
    errors = {e["path"]: e["message"] for e in r.json()["errors"]}
    assert path in errors and words in errors[path]


def test_resubmit_needs_the_submit_right_and_sight(world):
    assert world.call("vic", "POST", f"{JOBS}/{world.jobs['red']}/resubmit").status_code == 403
    assert world.call("bob", "POST", f"{JOBS}/{world.jobs['red']}/resubmit").status_code == 404


def test_resubmit_of_a_job_with_secrets_the_caller_may_not_read(world):
    secret = "env:\n  TOKEN: {secret: hunter2}\n"
    job = submit(world, "alice", "red", "with-secret", secret)
    assert world.call("amy", "POST", f"{JOBS}/{job}/resubmit").status_code == 403
    r = world.call("alice", "POST", f"{JOBS}/{job}/resubmit")
    assert r.status_code == 201, r.text
    again = world.store.jobs.get(r.json()["id"])
    assert again.spec["env"]["TOKEN"] == {"secret": "hunter2"}


# -- hold and release ----------------------------------------------------------------------


def test_a_held_job_does_not_start_keeps_its_place_and_starts_once_released(world):
    first = submit(world, "alice", "red", "first")
    second = submit(world, "amy", "red", "second")
    r = world.call("alice", "POST", f"{JOBS}/{first}/hold")
    assert r.status_code == 200, r.text
    assert r.json()["heldBy"] == "alice" and r.json()["pendingCode"] == "Held"
    world.ctl.run_cycle()  # red has 2 GPUs guaranteed, 1 used; 4 on the node
    assert str(world.store.jobs.get(first).state) == "QUEUED"
    assert str(world.store.jobs.get(second).state) == "SCHEDULED"  # it went past the held one
    held = world.call("alice", "GET", f"{JOBS}/{first}").json()
    assert held["pendingCode"] == "Held" and "gpuyard release" in held["pendingReason"]
    assert world.store.jobs.get(first).queued_at == world.store.jobs.get(first).submitted_at
    world.ctl.run_cycle()
    assert str(world.store.jobs.get(first).state) == "QUEUED"
    r = world.call("redboss", "POST", f"{JOBS}/{first}/release")
    assert r.status_code == 200 and r.json()["heldBy"] is None
    world.ctl.run_cycle()
    assert str(world.store.jobs.get(first).state) == "SCHEDULED"
    reasons = [reason.split(" ")[0] for reason, _ in events(world, first)]
    assert reasons[:4] == ["Submitted", "Held", "Released", "Scheduled"]
    assert ("Released", "released by redboss (held by alice)") in events(world, first)


def two_gpus(world, name: str) -> str:
    r = world.submit("alice", spec("red", name).replace("gpuNumber: 1", "gpuNumber: 2"))
    assert r.status_code == 201, r.text
    return r.json()["id"]


def test_a_released_job_is_back_in_the_place_it_held(world):
    """Only 2 GPUs are free, each job needs 2: b runs past the held a; released, a is ahead
    of c (submitted after it) and is the next to start."""
    a, b, c = (two_gpus(world, n) for n in "abc")
    world.call("alice", "POST", f"{JOBS}/{a}/hold")
    world.ctl.run_cycle()
    assert str(world.store.jobs.get(b).state) == "SCHEDULED"
    world.call("alice", "POST", f"{JOBS}/{a}/release")
    world.ctl.run_cycle()
    place = {j: world.store.jobs.get(j).pending_position for j in (a, c)}
    assert place == {a: 1, c: 2}
    finish(world, b)
    assert str(world.store.jobs.get(a).state) == "SCHEDULED"
    assert str(world.store.jobs.get(c).state) == "QUEUED"


@pytest.mark.parametrize(("who", "status"), RIGHTS)
def test_who_may_hold(world, who, status):
    job = submit(world, "alice", "red", "h")
    assert world.call(who, "POST", f"{JOBS}/{job}/hold").status_code == status


def test_only_a_queued_job_can_be_held(world):
    r = world.call("alice", "POST", f"{JOBS}/{world.jobs['red']}/hold")  # scheduled already
    assert r.status_code == 409 and "only a queued job" in r.json()["detail"]


# -- priority ------------------------------------------------------------------------------


@pytest.mark.parametrize(("who", "status"), RIGHTS)
def test_who_may_change_a_priority(world, who, status):
    job = submit(world, "alice", "red", "p")
    r = world.call(who, "POST", f"{JOBS}/{job}/priority", json={"priority": 50})
    assert r.status_code == status, r.text
    expected = 50 if status == 200 else 0
    assert world.store.jobs.get(job).priority == expected
    if status == 200:
        assert ("PriorityChanged", f"priority 0 → 50 by {who}") in events(world, job)
        assert world.store.jobs.get(job).spec["priority"] == 50


@pytest.mark.parametrize(
    ("body", "path"),
    [({"priority": 1001}, "body.priority"), ({"priority": -1001}, "body.priority"),
     ({"priority": True}, "body.priority"), ({}, "body.priority"), ({"priority": "1"}, "body.priority")],
)  # fmt: skip
def test_a_priority_out_of_range_is_422(world, body, path):
    r = world.call("alice", "POST", f"{JOBS}/{world.jobs['red']}/priority", json=body)
    assert r.status_code == 422, r.text
    assert [e["path"] for e in r.json()["errors"]] == [path]


def test_a_raised_priority_goes_first_in_the_queue(world):
    """Each job needs the 2 free GPUs: a blocker takes them while low and high wait (the
    controller keeps their demands); high, raised, is placed once the blocker ends."""
    blocker, low, high = (two_gpus(world, n) for n in ("blocker", "low", "high"))
    world.ctl.run_cycle()
    assert str(world.store.jobs.get(blocker).state) == "SCHEDULED"
    r = world.call("alice", "POST", f"{JOBS}/{high}/priority", json={"priority": 10})
    assert r.status_code == 200
    finish(world, blocker)
    world.ctl.run_cycle()
    assert str(world.store.jobs.get(high).state) == "SCHEDULED"
    assert str(world.store.jobs.get(low).state) == "QUEUED"


def test_an_ended_job_keeps_its_priority(world):
    finish(world, world.jobs["red"])
    assert str(world.store.jobs.get(world.jobs["red"]).state) == "SUCCEEDED"
    r = world.call("alice", "POST", f"{JOBS}/{world.jobs['red']}/priority", json={"priority": 1})
    assert r.status_code == 409, r.text


# -- a tenant's maximum priority -------------------------------------------------------


@pytest.fixture
def capped(world):
    """red's members may give priorities up to 10."""
    r = world.call("root", "PATCH", "/api/v1/tenants/red", json={"maxPriority": 10})
    assert r.status_code == 200 and r.json()["maxPriority"] == 10, r.text
    return world


@pytest.mark.parametrize(
    ("who", "value", "status"),
    [("alice", 10, 200), ("alice", 11, 403), ("alice", -1000, 200), ("redboss", 1000, 200),
     ("root", 500, 200)],
)  # fmt: skip
def test_a_member_stays_within_the_tenants_maximum(capped, who, value, status):
    job = submit(capped, "alice", "red", "capped")
    r = capped.call(who, "POST", f"{JOBS}/{job}/priority", json={"priority": value})
    assert r.status_code == status, r.text
    if status == 403:
        assert "up to 10 in tenant red (its maxPriority)" in r.json()["detail"]


def test_a_member_may_lower_a_priority_an_admin_set_above_the_maximum(capped):
    job = submit(capped, "alice", "red", "high")
    assert capped.call(
        "redboss", "POST", f"{JOBS}/{job}/priority", json={"priority": 50}
    ).is_success
    r = capped.call("alice", "POST", f"{JOBS}/{job}/priority", json={"priority": 40})
    assert r.status_code == 200 and capped.store.jobs.get(job).priority == 40
    r = capped.call("alice", "POST", f"{JOBS}/{job}/priority", json={"priority": 45})
    assert r.status_code == 403


def test_a_submit_above_the_maximum_is_refused_for_members_only(capped):
    r = capped.submit("alice", spec("red", "greedy", "priority: 11\n"))
    assert r.status_code == 422, r.text
    assert [e["path"] for e in r.json()["errors"]] == ["priority"]
    assert capped.submit("redboss", spec("red", "boss", "priority: 11\n")).status_code == 201
    r = capped.call("alice", "POST", f"{JOBS}/{capped.jobs['red']}/resubmit",
                    json={"set": {"priority": 99}})  # fmt: skip
    assert r.status_code == 422 and r.json()["errors"][0]["path"] == "priority"


def test_a_maximum_above_the_spec_range_is_refused(world):
    r = world.call("root", "PATCH", "/api/v1/tenants/red", json={"maxPriority": 1001})
    assert r.status_code == 422 and r.json()["errors"][0]["path"] == "maxPriority"
