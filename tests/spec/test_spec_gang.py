"""`gang` (ours) and OpenPAI's `extras.gangAllocation`: true by default, false kept through
the converted spec and its document, into the scheduler's demand; anything else refused at
its path."""

from __future__ import annotations

import pytest

from gpuyard.spec import SpecError, job_demand, load_job, parse_job_spec

ROLES = {"worker": {"taskNumber": 3, "command": "x"}}
PAI = """
protocolVersion: 2
name: many
type: job
prerequisites:
  - {name: image, type: dockerimage, uri: busybox:1}
taskRoles:
  worker:
    instances: 3
    dockerImage: image
    resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 1}
    commands: [python mnist.py]
extras:
  gangAllocation: %s
"""


def test_default_is_a_gang() -> None:
    spec = parse_job_spec({"name": "j", "taskRoles": ROLES})
    assert spec.gang and "gang" not in spec.to_document()
    assert job_demand(spec, "j1", 1).gang


def test_gang_false_round_trips_into_the_demand() -> None:
    spec = parse_job_spec({"name": "j", "gang": False, "taskRoles": ROLES})
    assert not spec.gang
    assert parse_job_spec(spec.to_document()) == spec and spec.to_document()["gang"] is False
    demand = job_demand(spec, "j1", 1)
    assert not demand.gang and not demand.remainder and len(demand.tasks) == 3


def test_openpai_gang_allocation_maps_onto_gang() -> None:
    loaded = load_job(PAI % "false")
    assert not loaded.spec.gang and not loaded.warnings
    assert load_job(PAI % "true").spec.gang


@pytest.mark.parametrize("value", ['"no"', "0"])
def test_anything_but_a_flag_is_refused(value: str) -> None:
    with pytest.raises(SpecError) as caught:
        load_job(PAI % value)
    assert [e.path for e in caught.value.errors] == ["extras.gangAllocation"]
    with pytest.raises(SpecError) as caught:
        parse_job_spec({"name": "j", "gang": "no", "taskRoles": ROLES})
    assert [e.path for e in caught.value.errors] == ["gang"]
