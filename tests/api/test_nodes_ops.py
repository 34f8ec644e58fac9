"""Operating the nodes through the API: cordon, drain (with a deadline), uncordon; the listing
shows each GPU's state and who uses it."""

from __future__ import annotations

import pytest

from gpuyard.model import JobState

from .conftest import World, spec


def gpus_of(world: World, who: str) -> list[dict]:
    r = world.call(who, "GET", "/api/v1/nodes")
    assert r.status_code == 200, r.text
    (node,) = r.json()["nodes"]
    return node["gpus"]


def test_the_listing_shows_gpu_states_and_users_to_those_who_may_see_them(shared_world):
    states = [g["state"] for g in gpus_of(shared_world, "root")]
    assert sorted(states) == ["free", "free", "used", "used"]
    by_root = {g["job"]: g for g in gpus_of(shared_world, "root") if g["state"] == "used"}
    red = by_root[shared_world.jobs["red"]]
    assert red["tenant"] == "red" and red["users"] == [
        {"job": shared_world.jobs["red"], "tenant": "red", "task": "main/0"}
    ]
    by_bob = [g for g in gpus_of(shared_world, "bob") if g["state"] == "used"]
    assert {(g["job"], g["tenant"]) for g in by_bob} == {
        (shared_world.jobs["blue"], "blue"),
        (None, None),  # red's job: busy, but not whose
    }


@pytest.mark.parametrize(
    ("who", "path", "body", "status", "words"),
    [
        ("alice", "/api/v1/nodes/n1/cordon", None, 403, "only a platform admin"),
        ("redboss", "/api/v1/nodes/n1/drain", None, 403, "only a platform admin"),
        ("root", "/api/v1/nodes/nope/cordon", None, 404, "no node nope"),
        ("root", "/api/v1/nodes/n1/drain", {"deadline": "soon"}, 422, "deadline"),
        ("root", "/api/v1/nodes/n1/cordon", {"deadline": "1h"}, 422, "only a drain"),
        ("root", "/api/v1/nodes/n1/cordon", {"typo": 1}, 422, "typo"),
    ],
)
def test_bad_node_requests_are_refused(shared_world, who, path, body, status, words):
    r = shared_world.call(who, "POST", path, json=body)
    assert r.status_code == status, r.text
    assert words in r.text


def test_a_cordoned_node_takes_no_new_work_until_uncordoned(world):
    r = world.call("root", "POST", "/api/v1/nodes/n1/cordon", json={"reason": "new fans"})
    assert r.status_code == 200, r.text
    node = r.json()
    assert node["state"] == "cordoned" and node["schedulable"] is False
    assert node["cordon"]["reason"] == "new fans" and node["cordon"]["by"] == "root"
    assert sorted(g["state"] for g in node["gpus"]) == ["cordoned", "cordoned", "used", "used"]
    late = world.submit("alice", spec("red", name="late")).json()["id"]
    world.ctl.run_cycle()
    assert world.store.jobs.get(late).state == JobState.QUEUED
    assert world.store.jobs.get(world.jobs["red"]).state.holds_resources  # running ones go on
    r = world.call("root", "POST", "/api/v1/nodes/n1/uncordon")
    assert r.status_code == 200 and r.json()["state"] == "ready"
    world.ctl.run_cycle()
    assert world.store.jobs.get(late).state == JobState.SCHEDULED


def test_a_drain_lets_jobs_run_until_its_deadline_then_preempts_them(world):
    for key in world.engine.launched:
        world.engine.run(key)
    world.ctl.run_cycle()
    r = world.call("root", "POST", "/api/v1/nodes/n1/drain", json={"deadline": "10m"})
    assert r.status_code == 200, r.text
    assert r.json()["state"] == "draining" and r.json()["cordon"]["deadline"]
    world.clock.advance(9 * 60)
    world.ctl.run_cycle()
    assert world.engine.stopped == {}
    world.clock.advance(2 * 60)
    world.ctl.run_cycle()
    assert set(world.engine.stopped) == set(world.engine.launched)
    assert set(world.engine.stopped.values()) == {30}  # the tenants' preemption grace
    red = world.jobs["red"]
    events = world.call("alice", "GET", f"/api/v1/jobs/{red}/events").json()["events"]
    assert any(e["reason"] == "NodeDrained" and "n1" in e["message"] for e in events)
    for key in world.engine.launched:
        world.engine.exit(key, 143, "Signal(SIGTERM)")
    world.ctl.run_cycle()
    job = world.store.jobs.get(red)
    assert (job.state, job.attempt, job.retries_used) == (JobState.QUEUED, 2, 0)
