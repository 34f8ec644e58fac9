"""Job arrays, dependencies and batch submissions through the real API and the real
controller on the fake engine (tests/api's world: tenant red with alice, blue with bob; one
node of 4 GPUs)."""

from __future__ import annotations

import json

import pytest

from api.conftest import spec

JOBS = "/api/v1/jobs"
ARRAYS = "/api/v1/arrays"
BATCH = "/api/v1/jobs:batch"
CPU_ONLY = "taskRoles:\n  main:\n    command: 'true'\n"


def submit(world, who: str, text: str) -> dict:
    r = world.submit(who, text)
    assert r.status_code == 201, r.text
    return r.json()


def finish(world, job_id: str, code: int = 0) -> None:
    for key in world.engine.keys_on(job_id):
        world.engine.exit(key, code, "Completed" if code == 0 else f"Error(exit {code})")
    world.ctl.run_cycle()


def state(world, job_id: str) -> dict:
    r = world.call("root", "GET", f"{JOBS}/{job_id}")
    assert r.status_code == 200, r.text
    return r.json()


def test_an_array_runs_at_most_its_limit_and_the_rest_hold_nothing(world):
    doc = f"name: sweep\ntenant: red\narray: '0-5%2'\n{CPU_ONLY}"
    out = submit(world, "alice", doc)
    children = out["children"]
    assert len(children) == 6
    world.ctl.run_cycle()
    started = [c for c in children if world.engine.keys_on(c)]
    assert started == children[:2]  # the lowest indices first
    waiting = state(world, children[2])
    assert (waiting["pendingCode"], waiting["arrayId"], waiting["arrayIndex"]) == (
        "ArrayTaskLimit",
        out["id"],
        2,
    )
    launch = world.engine.launched[world.engine.keys_on(children[1])[0]]
    assert ("GPUYARD_ARRAY_INDEX", "1") in launch.job_env
    assert ("GPUYARD_ARRAY_PARENT", out["id"]) in launch.job_env
    finish(world, children[0])
    world.ctl.run_cycle()
    assert world.engine.keys_on(children[2]) and not world.engine.keys_on(children[3])
    array = world.call("alice", "GET", f"{ARRAYS}/{out['id']}").json()
    assert array["state"] == "RUNNING" and array["maxRunning"] == 2
    assert array["counts"]["SUCCEEDED"] == 1 and array["running"] == 2
    assert [c["index"] for c in array["children"]] == list(range(6))


def test_cancelling_the_parent_stops_every_child(world):
    out = submit(world, "alice", f"name: sweep\ntenant: red\narray: '1,3,5-6'\n{CPU_ONLY}")
    world.ctl.run_cycle()
    assert world.call("bob", "POST", f"{ARRAYS}/{out['id']}/cancel").status_code == 404
    assert world.call("amy", "POST", f"{ARRAYS}/{out['id']}/cancel").status_code == 403
    r = world.call("alice", "POST", f"{ARRAYS}/{out['id']}/cancel")
    assert r.status_code == 202 and r.json()["cancelled"] == 4
    world.ctl.run_cycle()  # the stops are sent
    for key in world.engine.stopped:
        world.engine.exit(key, 143, "Cancelled")
    world.ctl.run_cycle()
    world.ctl.run_cycle()
    array = world.call("alice", "GET", f"{ARRAYS}/{out['id']}").json()
    assert array["state"] == "STOPPED"
    assert {c["state"] for c in array["children"]} == {"STOPPED"}
    assert [c["index"] for c in array["children"]] == [1, 3, 5, 6]


def test_the_list_names_each_childs_array(world):
    out = submit(world, "alice", f"name: sweep\ntenant: red\narray: '0-2'\n{CPU_ONLY}")
    page = world.call("alice", "GET", JOBS, params={"name": "sweep"}).json()
    assert {j["arrayId"] for j in page["jobs"]} == {out["id"]}
    assert [a["id"] for a in page["arrays"]] == [out["id"]]
    assert page["arrays"][0]["counts"] == {"QUEUED": 3}


def test_array_parameters_become_env_or_openpai_parameters(world):
    doc = (
        "name: sweep\ntenant: red\narray: '0-1'\narrayParameters: [{LR: 0.1}, {LR: 0.2}]\n"
        + CPU_ONLY
    )
    out = submit(world, "alice", doc)
    assert [state(world, c)["spec"]["env"]["LR"] for c in out["children"]] == ["0.1", "0.2"]
    pai = {
        "protocolVersion": 2,
        "name": "pai-sweep",
        "defaults": {"virtualCluster": "red"},
        "parameters": {"lr": 1},
        "array": "0-1",
        "arrayParameters": [{"lr": 0.5}, {"lr": 0.7}],
        "taskRoles": {
            "main": {
                "instances": 1,
                "resourcePerInstance": {"cpu": 1, "memoryMB": 512, "gpu": 0},
                "commands": ["train --lr <% $parameters.lr %>"],
            }
        },
    }
    r = world.call("alice", "POST", JOBS, json=pai)
    assert r.status_code == 201, r.text
    commands = [
        state(world, c)["spec"]["taskRoles"]["main"]["command"] for c in r.json()["children"]
    ]
    assert [c.splitlines()[-1] for c in commands] == ["train --lr 0.5", "train --lr 0.7"]


@pytest.mark.parametrize(
    ("extra", "path"),
    [
        ("array: '5-1'\n", "array"),
        ("array: '0-9%0'\n", "array"),
        ("array: 'a-b'\n", "array"),
        ("array: '1,1'\n", "array"),
        ("array: 10\n", "array"),
        ("array: '0-1'\narrayParameters: [{X: 1}]\n", "arrayParameters"),
        (
            "array: '0-1'\narrayParameters: [{X: 1}, {GPUYARD_X: 2}]\n",
            "arrayParameters[1].GPUYARD_X",
        ),
        ("arrayParameters: [{X: 1}]\n", "arrayParameters"),
        ("after: {ok: [nope]}\n", "after.ok[0]"),
        ("after: {sometimes: [x]}\n", "after.sometimes"),
        ("after: {ok: ['bad id!']}\n", "after.ok[0]"),
    ],
)
def test_bad_arrays_and_dependencies_are_422_at_their_path(shared_world, extra, path):
    r = shared_world.submit("alice", f"name: x\ntenant: red\n{extra}{CPU_ONLY}")
    assert r.status_code == 422, r.text
    assert path in [e["path"] for e in r.json()["errors"]], r.json()


def test_after_ok_starts_after_success_and_never_after_a_failure(world):
    first = submit(world, "alice", spec("red", "first"))["id"]
    ok = submit(world, "alice", spec("red", "second", f"after: {{ok: [{first}]}}\n"))["id"]
    notok = submit(world, "alice", spec("red", "third", f"after: {{notok: [{first}]}}\n"))["id"]
    world.ctl.run_cycle()
    waiting = state(world, ok)
    assert waiting["pendingCode"] == "Dependency" and first in waiting["pendingReason"]
    assert waiting["after"] == {"ok": [first]}
    assert not world.engine.keys_on(ok)
    finish(world, first)
    world.ctl.run_cycle()
    assert world.engine.keys_on(ok)
    never = state(world, notok)
    assert (never["state"], never["reason"]) == ("FAILED", "DependencyNeverSatisfied")
    assert first in never["message"]


def test_after_a_failure_the_ok_dependent_ends_never_satisfied(world):
    first = submit(world, "alice", spec("red", "first"))["id"]
    dep = submit(world, "alice", spec("red", "dep", f"after: {{ok: [{first}], any: [{first}]}}\n"))
    world.ctl.run_cycle()
    finish(world, first, code=3)
    world.ctl.run_cycle()
    ended = state(world, dep["id"])
    assert (ended["state"], ended["reason"]) == ("FAILED", "DependencyNeverSatisfied")


def test_a_batch_is_stored_whole_or_not_at_all(world):
    good = {"name": "b", "tenant": "red", "taskRoles": {"main": {"command": "true"}}}
    bad = {"name": "b", "tenant": "red", "taskRoles": {"main": {"gpuNumber": -1}}}
    before = len(world.call("root", "GET", JOBS).json()["jobs"])
    r = world.call("alice", "POST", BATCH, json={"jobs": [good, bad, {**good, "tenant": "blue"}]})
    assert r.status_code == 422, r.text
    paths = {e["path"] for e in r.json()["errors"]}
    assert {"jobs[1].taskRoles.main.gpuNumber", "jobs[1].taskRoles.main.command"} <= paths
    assert "jobs[2].tenant" in paths
    assert len(world.call("root", "GET", JOBS).json()["jobs"]) == before
    array = {**good, "array": "0-2%1"}
    r = world.call("alice", "POST", BATCH, json={"jobs": [good, array, good]})
    assert r.status_code == 201, r.text
    jobs = r.json()["jobs"]
    assert [len(j["children"] or []) for j in jobs] == [0, 3, 0]
    assert len(world.call("root", "GET", JOBS).json()["jobs"]) == before + 5


@pytest.mark.parametrize(
    ("body", "path"),
    [({"jobs": []}, "jobs"), ({"jobs": "x"}, "jobs"), ([1], "jobs"), ({"jobs": [{}], "x": 1}, "x")],
)
def test_a_batch_that_is_not_a_list_of_specs_is_422(shared_world, body, path):
    r = shared_world.call("alice", "POST", BATCH, content=json.dumps(body))
    assert r.status_code == 422, r.text
    assert [e["path"] for e in r.json()["errors"]] == [path]
