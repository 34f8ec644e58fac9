"""`priorityClass` at submission (the real app, tests/api/conftest.py's world): `prod`
outranks every priority in its tenant, so where members have a maxPriority only its tenant
admins and platform admins may submit it; a bad class is a 422 at its path."""

from __future__ import annotations

import pytest

from api.conftest import spec


@pytest.mark.parametrize(
    ("who", "cls", "status"),
    [("alice", "prod", 422), ("alice", "opportunistic", 201), ("redboss", "prod", 201),
     ("root", "prod", 201)],
)  # fmt: skip
def test_prod_needs_the_right_to_any_priority(world, who, cls, status):
    r = world.call("root", "PATCH", "/api/v1/tenants/red", json={"maxPriority": 10})
    assert r.status_code == 200, r.text
    r = world.submit(who, spec("red", "classy", f"priorityClass: {cls}\n"))
    assert r.status_code == status, r.text
    if status == 422:
        (error,) = r.json()["errors"]
        assert error["path"] == "priorityClass" and "maxPriority is 10" in error["message"]
    else:
        assert world.store.jobs.get(r.json()["id"]).spec["priorityClass"] == cls


def test_a_member_may_submit_prod_where_priorities_are_not_capped(world):
    assert world.submit("alice", spec("red", "p", "priorityClass: prod\n")).status_code == 201
    r = world.submit("alice", spec("red", "p", "priorityClass: urgent\n"))
    assert r.status_code == 422 and r.json()["errors"][0]["path"] == "priorityClass"
