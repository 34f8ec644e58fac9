"""`after` and job arrays cannot reach across tenants.

Attack: a member of blue names a red job in `after` (by REST, by a batch, by OpenPAI's REST
API): if accepted, blue learns that the id exists (a 422 for an unknown id, a 201 for a real
one) and, by watching when its own job starts, when red's job ends and whether it succeeded.
Defence: `after` may name only jobs and arrays the submitter can see; any other id gets the
same 422 at the same path, word for word, as an id that does not exist
(api/services/dependencies.py). A red job array is as invisible to blue as a red job: its
page and its cancel answer 404.
"""

from __future__ import annotations

import yaml

from api.conftest import spec

BATCH = "/api/v1/jobs:batch"


def refusal(r) -> list[dict]:
    assert r.status_code == 422, r.text
    return [e for e in r.json()["errors"] if e["path"].endswith("after.ok[0]")]


def test_another_tenants_job_reads_as_no_job(shared_world):
    red = shared_world.jobs["red"]
    theirs = shared_world.submit("bob", spec("blue", "b", f"after: {{ok: [{red}]}}\n"))
    missing = shared_world.submit("bob", spec("blue", "b", "after: {ok: [ffffffffffff]}\n"))
    [a], [b] = refusal(theirs), refusal(missing)
    assert a["message"].replace(red, "ID") == b["message"].replace("ffffffffffff", "ID")
    own = shared_world.submit("alice", spec("red", "a", f"after: {{ok: [{red}]}}\n"))
    assert own.status_code == 201, own.text


def test_nor_in_a_batch_nor_through_openpai(shared_world):
    red = shared_world.jobs["red"]
    doc = yaml.safe_load(spec("blue", "b", f"after: {{ok: [{red}]}}\n"))
    r = shared_world.call("bob", "POST", BATCH, json={"jobs": [doc]})
    assert [e["path"] for e in r.json()["errors"]] == ["jobs[0].after.ok[0]"]
    pai = {
        "protocolVersion": 2,
        "name": "p",
        "defaults": {"virtualCluster": "blue"},
        "after": {"ok": [red]},
        "taskRoles": {"w": {"commands": ["true"]}},
    }
    theirs = shared_world.call("bob", "POST", "/rest-server/api/v2/jobs", json=pai)
    pai["after"] = {"ok": ["ffffffffffff"]}
    missing = shared_world.call("bob", "POST", "/rest-server/api/v2/jobs", json=pai)
    assert theirs.status_code == missing.status_code == 400, theirs.text
    assert theirs.text.replace(red, "ID") == missing.text.replace("ffffffffffff", "ID")


def test_another_tenants_array_is_not_found(shared_world):
    r = shared_world.submit("alice", spec("red", "sweep", "array: '0-1'\n"))
    assert r.status_code == 201, r.text
    array = r.json()["id"]
    for method, path in (("GET", ""), ("POST", "/cancel")):
        answer = shared_world.call("bob", method, f"/api/v1/arrays/{array}{path}")
        assert answer.status_code == 404, answer.text
        none = shared_world.call("bob", method, f"/api/v1/arrays/ffffffffffff{path}")
        assert answer.json() == {
            **none.json(),
            "detail": none.json()["detail"].replace("ffffffffffff", array),
        }
    refused = refusal(shared_world.submit("bob", spec("blue", "b", f"after: {{ok: [{array}]}}\n")))
    assert refused
