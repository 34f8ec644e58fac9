"""Our format: accepted values, defaults, normalisation, round trip, JobDemand."""

from __future__ import annotations

import json

import pytest
import yaml
from spec_docs import doc, role_doc

from gpuyard.model import JobDemand, Resources, TaskDemand
from gpuyard.spec import (
    JobSpec,
    TaskRoleSpec,
    job_demand,
    load_job_spec,
    parse_job_spec,
)

FULL_YAML = """
name: mnist-train
image: python:3.11-slim
dataDir: /srv/data/mnist
outputDir: /srv/out/mnist
env: {LR: "0.1", EPOCHS: 3, DEBUG: true, SCALE: 0.5}
retryCount: 2
priority: 10
tenant: vision
maxRuntime: 1h30m
taskRoles:
  ps:
    command: python ps.py
  worker:
    taskNumber: 2
    cpuNumber: 2.5
    memoryMB: 4096
    gpuNumber: 1
    gpuType: A100
    command: [cd /work, python train.py]
"""


def test_full_document_in_our_format():
    spec = load_job_spec(FULL_YAML)
    assert spec == JobSpec(
        name="mnist-train",
        image="python:3.11-slim",
        data_dir="/srv/data/mnist",
        output_dir="/srv/out/mnist",
        env={"LR": "0.1", "EPOCHS": "3", "DEBUG": "true", "SCALE": "0.5"},
        retry_count=2,
        priority=10,
        tenant="vision",
        max_runtime_s=5400,
        task_roles={
            "ps": TaskRoleSpec(command="python ps.py"),
            "worker": TaskRoleSpec(
                task_number=2,
                cpu_number=2.5,
                memory_mb=4096,
                gpu_number=1,
                gpu_type="A100",
                command="cd /work\npython train.py",
            ),
        },
    )
    assert list(spec.task_roles) == ["ps", "worker"]
    assert (spec.task_count, spec.total_gpus) == (3, 2)


def test_defaults():
    spec = parse_job_spec(doc())
    assert (spec.image, spec.data_dir, spec.output_dir, spec.max_runtime_s) == (None,) * 4
    assert (spec.env, spec.retry_count, spec.priority, spec.tenant) == ({}, 0, 0, "default")
    role = spec.task_roles["worker"]
    assert (role.task_number, role.cpu_number, role.memory_mb, role.gpu_number) == (1, 1.0, 1024, 0)
    assert role.gpu_type is None


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (90, 90),
        ("90", 90),
        ("90s", 90),
        ("30m", 1800),
        ("2h", 7200),
        ("1h30m", 5400),
        ("1d", 86400),
        ("1d2h3m4s", 93784),
        ("2H", 7200),
        ("1h 30m", 5400),
    ],
)
def test_max_runtime_forms(value, seconds):
    assert parse_job_spec(doc(maxRuntime=value)).max_runtime_s == seconds


@pytest.mark.parametrize(
    ("value", "mb"),
    [
        (4096, 4096),
        ("4096", 4096),
        ("512M", 512),
        ("512Mi", 512),
        ("4G", 4096),
        ("4Gi", 4096),
        ("4GB", 4096),
        ("1.5G", 1536),
        ("1T", 1048576),
        (2048.0, 2048),
    ],
)
def test_memory_forms(value, mb):
    assert parse_job_spec(role_doc(memoryMB=value)).task_roles["worker"].memory_mb == mb


@pytest.mark.parametrize(
    ("value", "cpu"), [(2, 2.0), (0.5, 0.5), ("0.25", 0.25), (0.001, 0.001), (1.23456, 1.235)]
)
def test_cpu_forms(value, cpu):
    assert parse_job_spec(role_doc(cpuNumber=value)).task_roles["worker"].cpu_number == cpu


@pytest.mark.parametrize(
    ("field", "value", "attr", "expected"),
    [
        ("taskNumber", "3", "task_number", 3),
        ("gpuNumber", 2.0, "gpu_number", 2),
        ("gpuNumber", 0, "gpu_number", 0),
        ("command", ["a", "b", "c"], "command", "a\nb\nc"),
        ("command", "line1\nline2\n", "command", "line1\nline2\n"),
        ("gpuType", "A100-80GB", "gpu_type", "A100-80GB"),
    ],
)
def test_role_values(field, value, attr, expected):
    role = parse_job_spec(role_doc(**{field: value})).task_roles["worker"]
    assert getattr(role, attr) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1, "1"), (0.1, "0.1"), (True, "true"), (False, "false"), ("x y", "x y"), ("", "")],
)
def test_env_values_become_strings(value, expected):
    assert parse_job_spec(doc(env={"V": value})).env == {"V": expected}


@pytest.mark.parametrize(
    "text",
    [
        FULL_YAML,
        "name: a\ntaskRoles: {r: {command: x}}",
        "name: b\nenv: {}\ntaskRoles: {r: {command: x, gpuNumber: 4}}",
    ],
)
def test_round_trip(text):
    spec = load_job_spec(text)
    document = spec.to_document()
    assert parse_job_spec(document) == spec
    assert load_job_spec(json.dumps(document), "application/json") == spec
    assert load_job_spec(yaml.safe_dump(document, sort_keys=False)) == spec


def test_to_document_is_our_camel_case_format():
    document = load_job_spec(FULL_YAML).to_document()
    assert list(document) == [
        "name",
        "image",
        "dataDir",
        "outputDir",
        "env",
        "retryCount",
        "priority",
        "tenant",
        "maxRuntime",
        "webhook",
        "hostNetwork",
        "taskRoles",
    ]
    assert document["maxRuntime"] == 5400
    assert document["taskRoles"]["worker"] == {
        "taskNumber": 2,
        "cpuNumber": 2.5,
        "memoryMB": 4096,
        "gpuNumber": 1,
        "gpuType": "A100",
        "command": "cd /work\npython train.py",
    }
    assert document["taskRoles"]["ps"]["cpuNumber"] == 1  # whole cores written as ints


def test_spec_is_immutable_and_owns_its_dicts():
    env = {"A": "1"}
    spec = JobSpec(name="x", env=env, task_roles={"r": TaskRoleSpec(command="c")})
    env["B"] = "2"
    assert spec.env == {"A": "1"}
    with pytest.raises(AttributeError):
        spec.name = "y"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        spec.task_roles["r"].command = "d"  # type: ignore[misc]
    assert hash(spec) == hash(parse_job_spec(spec.to_document()))


def test_json_body_with_tabs_and_bytes():
    body = b'{\n\t"name": "j",\n\t"taskRoles": {"w": {"command": "echo", "gpuNumber": 1}}\n}'
    assert load_job_spec(body).total_gpus == 1
    assert load_job_spec(body, "application/json; charset=utf-8").name == "j"
    assert load_job_spec("\ufeffname: bom\ntaskRoles: {w: {command: c}}".encode()).name == "bom"


def test_yaml_flow_style_that_is_not_json():
    assert load_job_spec("{name: j, taskRoles: {w: {command: echo}}}").name == "j"


def test_job_demand_one_task_per_instance_in_role_order():
    spec = load_job_spec(FULL_YAML)
    demand = job_demand(spec, "job-7", 42)
    worker = Resources.of(2.5, 4096, 1)
    assert demand == JobDemand(
        job_id="job-7",
        tenant="vision",
        priority=10,
        seq=42,
        tasks=(
            TaskDemand("ps", 0, Resources.of(1, 1024, 0), None),
            TaskDemand("worker", 0, worker, "A100"),
            TaskDemand("worker", 1, worker, "A100"),
        ),
    )
    assert demand.total == Resources(6000, 9216, 2)


def test_job_demand_drops_gpu_type_without_gpus():
    spec = parse_job_spec(role_doc(gpuType="A100", gpuNumber=0))
    assert job_demand(spec, "j", 1).tasks[0].gpu_type is None
