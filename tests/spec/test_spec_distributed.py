"""Our format's distributed-job fields: ports and the completion policy, and the names of the
variables the platform sets for every task of a job."""

from __future__ import annotations

import pytest

from gpuyard.spec import SpecError, parse_job_spec


def role(**fields: object) -> dict:
    return {"name": "j", "taskRoles": {"w": {"taskNumber": 3, "command": "x", **fields}}}


@pytest.mark.parametrize(
    ("fields", "ports", "min_failed", "min_succeeded"),
    [
        ({}, (), 1, -1),
        ({"ports": {"http": 1, "nccl": "2"}}, (("http", 1), ("nccl", 2)), 1, -1),
        ({"minFailedTasks": -1, "minSucceededTasks": 3}, (), -1, 3),
        ({"minFailedTasks": "2"}, (), 2, -1),
    ],
)
def test_fields_are_read_and_round_trip(fields, ports, min_failed, min_succeeded):
    spec = parse_job_spec(role(**fields))
    r = spec.task_roles["w"]
    assert (r.ports, r.min_failed, r.min_succeeded) == (ports, min_failed, min_succeeded)
    assert parse_job_spec(spec.to_document()) == spec


@pytest.mark.parametrize(
    ("doc", "path", "words"),
    [
        (role(ports={"http": 0}), "taskRoles.w.ports.http", "≥ 1"),
        (role(ports={"1x": 1}), "taskRoles.w.ports.1x", "not a valid port label"),
        (role(ports=[8080]), "taskRoles.w.ports", "mapping of port labels"),
        (role(ports={"a": 40, "b": 30}), "taskRoles.w.ports", "at most 64"),
        (role(minFailedTasks=0), "taskRoles.w.minFailedTasks", "-1 for none"),
        (role(minSucceededTasks=4), "taskRoles.w.minSucceededTasks", "number of tasks (3)"),
        (role(minFailedInstances=1), "taskRoles.w.minFailedInstances", "minFailedTasks"),
        (role(completion={}), "taskRoles.w.completion", "minFailedTasks and minSucceededTasks"),
        ({**role(), "env": {"RANK": "3"}}, "env.RANK", "reserved"),
        ({**role(), "env": {"master_addr": "x"}}, "env.master_addr", "reserved"),
    ],
)
def test_bad_fields_name_their_path(doc, path, words):
    with pytest.raises(SpecError) as err:
        parse_job_spec(doc)
    messages = {e.path: e.message for e in err.value.errors}
    assert path in messages and words in messages[path], messages
