"""OpenPAI protocol v2: conversion to our spec, and errors under OpenPAI's own paths."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpuyard.model import PriorityClass
from gpuyard.spec import JobSpec, SpecError, TaskRoleSpec, load_job_spec, parse_job_spec
from gpuyard.spec.models import Secret
from gpuyard.spec.openpai_script import HEADER

OPENPAI_PORTS = (("http", 1), ("ssh", 1))  # reserved for every task, as OpenPAI does


def script(entrypoint: str) -> str:
    """A role's command as converted: OpenPAI's errexit/pipefail header, then the chain."""
    return "\n".join([*HEADER, entrypoint])


PAI: dict[str, Any] = {
    "protocolVersion": 2,
    "name": "cifar10_resnet",
    "type": "job",
    "version": 1.0,
    "contributor": "alice",
    "description": "distributed training",
    "prerequisites": [
        {
            "protocolVersion": 2,
            "name": "tf",
            "type": "dockerimage",
            "uri": "openpai/tf:2",
            "auth": {"username": "u", "password": "<% $secrets.token %>"},
        },
        {"name": "cifar10", "type": "data", "uri": ["https://example.com/c.tgz"]},
        {"name": "bench", "type": "script", "uri": "github.com/x/bench", "version": "abc"},
        {"name": "model", "type": "output", "uri": "hdfs://h/model"},
    ],
    "parameters": {"model": "resnet20", "batchsize": 32, "lr": 0.1, "fp16": True},
    "secrets": {"token": "s3cret"},
    "jobRetryCount": 2,
    "defaults": {"virtualCluster": "vision", "deployment": "prod"},
    "taskRoles": {
        "train": {
            "instances": 2,
            "completion": {"minFailedInstances": 1, "minSucceededInstances": -1},
            "taskRetryCount": 0,
            "dockerImage": "tf",
            "data": "cifar10",
            "script": "bench",
            "output": "model",
            "extraContainerOptions": {"shmMB": 64, "infiniband": False},
            "resourcePerInstance": {"cpu": 4, "memoryMB": 8192, "gpu": 2, "ports": {"ssh": 1}},
            "commands": [
                "cd script_<% $script.name %>",
                "python train.py --model=<% $parameters.model %> --bs=<%$parameters.batchsize%>",
            ],
        },
        "ps": {
            "dockerImage": "tf",
            "resourcePerInstance": {"cpu": 1, "memoryMB": 1024, "gpu": 0},
            "commands": ["python ps.py --token=<% $secrets.token %>"],
        },
    },
    "deployments": [{"name": "prod", "taskRoles": {"train": {"preCommands": ["echo hi"]}}}],
    "extras": {
        "hivedScheduler": {"jobPriorityClass": "prod"},
        "com.microsoft.pai.runtimeplugin": [],
    },
}


def pai(**changes: Any) -> dict[str, Any]:
    """PAI with `changes`; `__` reaches inside (`taskRoles__train__instances`, `prerequisites__0`);
    a None value removes the key from a mapping."""
    out = copy.deepcopy(PAI)
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        target = out
        for key in parents:
            target = target[int(key)] if isinstance(target, list) else target[key]
        if isinstance(target, list):
            target[int(last)] = value
        elif value is None:
            target.pop(last, None)
        else:
            target[last] = value
    return out


def test_conversion():
    assert parse_job_spec(PAI) == JobSpec(
        name="cifar10_resnet",
        image="openpai/tf:2",
        retry_count=2,
        tenant="vision",
        priority_class=PriorityClass.PROD,  # HiveD's jobPriorityClass: prod
        task_roles={
            "train": TaskRoleSpec(
                task_number=2,
                cpu_number=4,
                memory_mb=8192,
                gpu_number=2,
                ports=OPENPAI_PORTS,
                # the deployment's preCommands first, every command joined with ' && '
                command=script(
                    "echo hi && cd script_bench && python train.py --model=resnet20 --bs=32"
                ),
            ),
            # the secret is substituted, and the command that holds it is secret itself
            "ps": TaskRoleSpec(
                command=Secret(script("python ps.py --token=s3cret")),
                memory_mb=1024,
                ports=OPENPAI_PORTS,
            ),
        },
    )


@pytest.mark.parametrize(
    ("completion", "min_failed", "min_succeeded"),
    [
        ({"minFailedInstances": 1, "minSucceededInstances": -1}, 1, -1),
        ({"minFailedInstances": None, "minSucceededInstances": None}, -1, -1),
        ({"minFailedInstances": -1, "minSucceededInstances": 1}, -1, 1),
        ({"minFailedInstances": 2}, 2, -1),
        ({}, 1, -1),
    ],
)
def test_completion_policy_maps_per_role(completion, min_failed, min_succeeded):
    role = parse_job_spec(pai(taskRoles__train__completion=completion)).task_roles["train"]
    assert (role.min_failed, role.min_succeeded) == (min_failed, min_succeeded)


@pytest.mark.parametrize(
    ("change", "path", "words"),
    [
        ({"minFailedInstances": 0}, "taskRoles.train.completion.minFailedInstances", "≥ 1"),
        ({"minSucceededInstances": 0}, "taskRoles.train.completion.minSucceededInstances", "≥ 1"),
        ({"minFailed": 1}, "taskRoles.train.completion.minFailed", "unknown"),
        ("all", "taskRoles.train.completion", "must be a mapping"),
    ],
)
def test_bad_completion_policy_names_the_openpai_field(change, path, words):
    with pytest.raises(SpecError) as err:
        parse_job_spec(pai(taskRoles__train__completion=change))
    messages = {e.path: e.message for e in err.value.errors}
    assert path in messages and words in messages[path], messages


@pytest.mark.parametrize(
    ("changes", "attr", "expected"),
    [
        ({"protocolVersion": "2"}, "name", "cifar10_resnet"),
        ({"jobRetryCount": None}, "retry_count", 0),
        ({"defaults": None}, "tenant", "default"),
        ({"defaults__virtualCluster": None}, "tenant", "default"),
        (
            {"type": None, "version": None, "contributor": None, "description": None},
            "name",
            "cifar10_resnet",
        ),
        ({"deployments": None, "defaults__deployment": None, "extras": None}, "total_gpus", 4),
        ({"taskRoles__train__instances": None}, "task_count", 2),
        ({"taskRoles__train__resourcePerInstance": None}, "total_gpus", 0),
        (
            {
                "prerequisites": None,
                "taskRoles__train__dockerImage": None,
                "taskRoles__ps__dockerImage": None,
                "taskRoles__train__commands": ["x"],
            },
            "image",
            None,
        ),
    ],
)
def test_conversion_variants(changes, attr, expected):
    assert getattr(parse_job_spec(pai(**changes)), attr) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("lr=<% $parameters.lr %>", "lr=0.1"),
        ("fp16=<% $parameters.fp16 %>", "fp16=true"),
        ("<% $data.uri[0] %>", "https://example.com/c.tgz"),
        ("<% $output.uri %>/<% $script.version %>", "hdfs://h/model/abc"),
        ("a <%   $parameters.model   %> b <% $parameters.model %>", "a resnet20 b resnet20"),
        ("echo $PAI_JOB_NAME", "echo $PAI_JOB_NAME"),
    ],
)
def test_substitution(command, expected):
    spec = parse_job_spec(pai(taskRoles__train__commands=[command], defaults__deployment=None))
    assert spec.task_roles["train"].command == script(expected)


def test_yaml_text_and_string_protocol_version():
    text = """
protocolVersion: "2"
name: hello
type: job
prerequisites:
  - {name: img, type: dockerimage, uri: "ubuntu:22.04"}
taskRoles:
  main:
    instances: 1
    dockerImage: img
    resourcePerInstance: {cpu: 1, memoryMB: 512, gpu: 1}
    commands:
      - echo hello
      - nvidia-smi
"""
    spec = load_job_spec(text)
    assert (spec.image, spec.total_gpus, spec.task_roles["main"].command) == (
        "ubuntu:22.04",
        1,
        script("echo hello && nvidia-smi"),
    )


T = "taskRoles.train"
R = f"{T}.resourcePerInstance"

PAI_ERRORS = [
    ({"protocolVersion": 1}, "protocolVersion", "only OpenPAI protocol v2"),
    ({"type": "data"}, "type", "must be job"),
    ({"name": None}, "name", "is required"),
    ({"name": "bad name"}, "name", "got 'bad name'"),
    ({"jobRetryCount": -1}, "jobRetryCount", "must be a whole number ≥ 0, got -1"),
    ({"defaults__virtualCluster": "a b"}, "defaults.virtualCluster", "got 'a b'"),
    ({"defaults__queue": "x"}, "defaults.queue", "unknown field"),
    ({"defaults": "vc"}, "defaults", "must be a mapping"),
    ({"parameters": [1]}, "parameters", "must be a mapping"),
    ({"secrets": "x"}, "secrets", "must be a mapping"),
    ({"prerequisites": {}}, "prerequisites", "must be a list"),
    ({"prerequisites__1": "x"}, "prerequisites[1]", "must be a mapping"),
    ({"prerequisites__3__type": "model"}, "prerequisites[3].type", "one of dockerimage, data"),
    ({"prerequisites__0__uri": "a b"}, "prerequisites[0].uri", "without spaces"),
    ({"prerequisites__0__uri": None}, "prerequisites[0].uri", "image reference"),
    ({"prerequisites__0__name": None}, "prerequisites[0].name", "dockerImage"),
    ({"foo": 1}, "foo", "unknown field"),
    ({"jobName": "x"}, "jobName", "unknown field"),
    ({"taskRoles": None}, "taskRoles", "is required"),
    ({"taskRoles": {}}, "taskRoles", "at least one task role"),
    ({"taskRoles__train": "x"}, T, "must be a mapping"),
    ({"taskRoles__train__instances": 0}, f"{T}.instances", "must be a whole number ≥ 1, got 0"),
    ({"taskRoles__train__instances": "two"}, f"{T}.instances", "got 'two'"),
    ({"taskRoles__train__replicas": 2}, f"{T}.replicas", "unknown field"),
    ({"taskRoles__train__resourcePerInstance": 4}, R, "must be a mapping with cpu"),
    ({"taskRoles__train__resourcePerInstance__gpu": "two"}, f"{R}.gpu", "whole number ≥ 0"),
    ({"taskRoles__train__resourcePerInstance__gpu": -1}, f"{R}.gpu", "got -1"),
    ({"taskRoles__train__resourcePerInstance__cpu": 0}, f"{R}.cpu", "CPU cores > 0"),
    ({"taskRoles__train__resourcePerInstance__memoryMB": 1}, f"{R}.memoryMB", "≥ 16"),
    ({"taskRoles__train__resourcePerInstance__gpuType": "A"}, f"{R}.gpuType", "unknown field"),
    ({"taskRoles__train__commands": None}, f"{T}.commands", "is required"),
    ({"taskRoles__train__commands": []}, f"{T}.commands", "non-empty command"),
    ({"taskRoles__train__commands": ["ok", 5]}, f"{T}.commands[1]", "must be a string"),
    (
        {"taskRoles__train__commands": ["<% $parameters.nope %>"]},
        f"{T}.commands[0]",
        "no parameter named 'nope' (defined: model, batchsize, lr, fp16)",
    ),
    (
        {"taskRoles__train__commands": ["<% $secrets.pw %>"]},
        f"{T}.commands[0]",
        "no secret named 'pw'",
    ),
    ({"taskRoles__train__commands": ["<% $foo.x %>"]}, f"{T}.commands[0]", "unknown reference"),
    ({"taskRoles__train__commands": ["<% $data.uri[3] %>"]}, f"{T}.commands[0]", "no item 3"),
    ({"taskRoles__train__commands": ["<% $data.uri %>"]}, f"{T}.commands[0]", "a list or mapping"),
    (
        {"taskRoles__ps__commands": ["<% $data.name %>"]},
        "taskRoles.ps.commands[0]",
        "names no data prerequisite",
    ),
    (
        {"taskRoles__train__dockerImage": "nope"},
        f"{T}.dockerImage",
        "must name a dockerimage prerequisite (tf), got 'nope'",
    ),
    (
        {"taskRoles__ps__dockerImage": None},
        "taskRoles.ps.dockerImage",
        "uses no image but role 'train' uses image 'openpai/tf:2'",
    ),
]


@pytest.mark.parametrize(("changes", "path", "words"), PAI_ERRORS)
def test_errors_use_openpai_paths(changes, path, words):
    with pytest.raises(SpecError) as caught:
        parse_job_spec(pai(**changes))
    assert [e.path for e in caught.value.errors] == [path], caught.value.errors
    assert words in caught.value.errors[0].message


def test_roles_with_different_images():
    """Each role runs the image its dockerImage names: the first role's is the job's, a role
    with another image gets its own."""
    document = pai()
    document["prerequisites"].append({"name": "tf1", "type": "dockerimage", "uri": "openpai/tf:1"})
    document["taskRoles"]["ps"]["dockerImage"] = "tf1"
    spec = parse_job_spec(document)
    assert (spec.image, spec.task_roles["train"].image, spec.task_roles["ps"].image) == (
        "openpai/tf:2",
        None,
        "openpai/tf:1",
    )
    assert (spec.image_of("train"), spec.image_of("ps")) == ("openpai/tf:2", "openpai/tf:1")
    assert parse_job_spec(spec.to_document()) == spec


def test_same_image_under_two_names_is_one_image():
    document = pai()
    document["prerequisites"].append({"name": "tf2", "type": "dockerimage", "uri": "openpai/tf:2"})
    document["taskRoles"]["ps"]["dockerImage"] = "tf2"
    assert parse_job_spec(document).image == "openpai/tf:2"


def test_duplicate_image_prerequisite_names():
    document = pai()
    document["prerequisites"].append({"name": "tf", "type": "dockerimage", "uri": "other"})
    with pytest.raises(SpecError) as caught:
        parse_job_spec(document)
    assert [e.path for e in caught.value.errors] == ["prerequisites[4].name"]


def test_several_openpai_errors_at_once():
    document = pai(
        jobRetryCount="x",
        taskRoles__train__instances=0,
        taskRoles__train__resourcePerInstance__gpu="two",
        taskRoles__ps__commands=["<% $parameters.missing %>"],
        extras="anything goes here",
    )
    with pytest.raises(SpecError) as caught:
        parse_job_spec(document)
    assert sorted(e.path for e in caught.value.errors) == sorted(
        [
            "extras",
            "jobRetryCount",
            f"{T}.instances",
            f"{R}.gpu",
            "taskRoles.ps.commands[0]",
        ]
    )


def test_converted_spec_round_trips_in_our_format():
    spec = parse_job_spec(PAI)
    document = spec.to_document()
    assert "protocolVersion" not in document
    assert parse_job_spec(document) == spec
