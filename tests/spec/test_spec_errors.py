"""Bad specs: every error has the field's path and a message a person understands."""

from __future__ import annotations

import pytest
from spec_docs import doc, role_doc

from gpuyard.spec import FieldError, SpecError, load_job_spec, parse_job_spec
from gpuyard.spec.limits import MAX_SPEC_BYTES

W = "taskRoles.worker"

BAD_FIELDS = [
    # (document, path, words the message must contain)
    (doc(name=None), "name", "is required"),
    (doc(name=""), "name", "must be 1 to 63 letters"),
    (doc(name="-x"), "name", "got '-x'"),
    (doc(name="a" * 64), "name", "1 to 63"),
    (doc(name="has space"), "name", "letters, digits"),
    (doc(name=False), "name", "put the value in quotes"),
    (doc(name=12), "name", "got 12"),
    (doc(image=""), "image", "image reference"),
    (doc(image="python 3"), "image", "without spaces"),
    (doc(dataDir="data/mnist"), "dataDir", "absolute path"),
    (doc(dataDir="/srv/../etc"), "dataDir", "without '..'"),
    (doc(outputDir="/"), "outputDir", "not the root directory"),
    (doc(outputDir=5), "outputDir", "absolute path"),
    (doc(env=["A=1"]), "env", "mapping of variable names"),
    (doc(env={"1A": "x"}), "env.1A", "not a valid variable name"),
    (doc(env={"A-B": "x"}), "env.A-B", "not a valid variable name"),
    (doc(env={"GPUYARD_JOB": "x"}), "env.GPUYARD_JOB", "reserved"),
    (doc(env={"PAI_JOB_NAME": "x"}), "env.PAI_JOB_NAME", "reserved"),
    (doc(env={"CUDA_VISIBLE_DEVICES": "0"}), "env.CUDA_VISIBLE_DEVICES", "reserved"),
    (doc(env={"A": None}), "env.A", "must be a string, a number or true/false, got null"),
    (doc(env={"A": {"b": 1}}), "env.A", "got a mapping"),
    (doc(retryCount=-1), "retryCount", "must be a whole number ≥ 0, got -1"),
    (doc(retryCount=101), "retryCount", "at most 100"),
    (doc(retryCount=1.5), "retryCount", "whole number"),
    (doc(retryCount=True), "retryCount", "must be a whole number ≥ 0, got true"),
    (doc(priority=1001), "priority", "from -1000 to 1000, got 1001"),
    (doc(priority="high"), "priority", "from -1000 to 1000, got 'high'"),
    (doc(tenant="team a"), "tenant", "got 'team a'"),
    (doc(maxRuntime="2 hours"), "maxRuntime", "like 90s, 30m, 2h"),
    (doc(maxRuntime="1.5h"), "maxRuntime", "duration"),
    (doc(maxRuntime=0), "maxRuntime", "≥ 1"),
    (doc(maxRuntime="31d"), "maxRuntime", "at most 30d"),
    (doc(taskRoles=None), "taskRoles", "is required"),
    (doc(taskRoles={}), "taskRoles", "at least one task role"),
    (doc(taskRoles=["worker"]), "taskRoles", "got a list"),
    (doc(taskRoles={"9w": {"command": "x"}}), "taskRoles.9w", "not a valid role name"),
    (doc(taskRoles={"w-1": {"command": "x"}}), "taskRoles.w-1", "letters, digits or '_'"),
    (doc(taskRoles={"w": "python x.py"}), "taskRoles.w", "must be a mapping"),
    (doc(taskRoles={f"r{i}": {"command": "x"} for i in range(33)}), "taskRoles", "at most 32"),
    (
        doc(taskRoles={"a": {"command": "x", "taskNumber": 1000}, "b": {"command": "x"}}),
        "taskRoles",
        "at most 1000 tasks",
    ),
    (role_doc(command=None), f"{W}.command", "is required"),
    (role_doc(command="  "), f"{W}.command", "non-empty command"),
    (role_doc(command=[]), f"{W}.command", "got a list"),
    (role_doc(command=["ok", 3]), f"{W}.command[1]", "must be a string"),
    (role_doc(command="x" * 70000), f"{W}.command", "at most"),
    (role_doc(taskNumber=0), f"{W}.taskNumber", "must be a whole number ≥ 1, got 0"),
    (role_doc(taskNumber=1001), f"{W}.taskNumber", "at most 1000"),
    (role_doc(cpuNumber=0), f"{W}.cpuNumber", "number of CPU cores > 0"),
    (role_doc(cpuNumber="two"), f"{W}.cpuNumber", "got 'two'"),
    (role_doc(cpuNumber=float("nan")), f"{W}.cpuNumber", "got NaN"),
    (role_doc(cpuNumber=0.0001), f"{W}.cpuNumber", "one millicore"),
    (role_doc(cpuNumber=2000), f"{W}.cpuNumber", "at most 1024"),
    (role_doc(memoryMB=8), f"{W}.memoryMB", "≥ 16"),
    (role_doc(memoryMB="lots"), f"{W}.memoryMB", "a size like 512M or 4G"),
    (role_doc(memoryMB="4KB"), f"{W}.memoryMB", "got '4KB'"),
    (role_doc(memoryMB="0.5M"), f"{W}.memoryMB", "whole number of MB"),
    (role_doc(memoryMB="5T"), f"{W}.memoryMB", "at most"),
    (
        role_doc(gpuNumber="two"),
        f"{W}.gpuNumber",
        "must be a whole number ≥ 0, or a fraction of one GPU like 0.5, got 'two'",
    ),
    (role_doc(gpuNumber=-1), f"{W}.gpuNumber", "like 0.5, got -1"),
    (role_doc(gpuNumber=1.5), f"{W}.gpuNumber", "cannot take part of several GPUs, got 1.5"),
    (role_doc(gpuNumber=0.0001), f"{W}.gpuNumber", "at least 0.001"),
    (role_doc(gpuMemoryMB="lots"), f"{W}.gpuMemoryMB", "or a size like 20G, got 'lots'"),
    (role_doc(gpuMemoryMB=8), f"{W}.gpuMemoryMB", "≥ 16"),
    (role_doc(gpuMemoryMB=20000, gpuNumber=1), f"{W}.gpuMemoryMB", "cannot be combined"),
    (role_doc(gpuMemoryMB=20000, gpuNumber=0.5), f"{W}.gpuMemoryMB", "a fraction of one GPU"),
    (role_doc(gpuComputePercent=50), f"{W}.gpuComputePercent", "only applies to a shared"),
    (role_doc(gpuComputePercent=50, gpuNumber=2), f"{W}.gpuComputePercent", "only applies"),
    (
        role_doc(gpuComputePercent=0, gpuMemoryMB=1000),
        f"{W}.gpuComputePercent",
        "from 1 to 100",
    ),
    (role_doc(gpuMem=1000), f"{W}.gpuMem", "did you mean 'gpuMemoryMB'?"),
    (role_doc(gpuNumber=65), f"{W}.gpuNumber", "at most 64"),
    (role_doc(gpuType="A100 80GB"), f"{W}.gpuType", "like A100 or A100-80GB"),
    (role_doc(gpuType=100), f"{W}.gpuType", "got 100"),
]

UNKNOWN_FIELDS = [
    (doc(retry_count=1), "retry_count", "did you mean 'retryCount'?"),
    (doc(nmae="x"), "nmae", "did you mean 'name'?"),
    (doc(image_name="x"), "image_name", "unknown field"),
    (doc(queue="a"), "queue", "did you mean 'tenant'?"),
    (doc(jobRetryCount=1), "jobRetryCount", "protocolVersion: 2"),
    (doc(jobName="x"), "jobName", "OpenPAI v1"),
    (doc(foo=1), "foo", "allowed here: name, image"),
    (role_doc(gpus=1), f"{W}.gpus", "did you mean 'gpuNumber'?"),
    (role_doc(memory_mb=1), f"{W}.memory_mb", "did you mean 'memoryMB'?"),
    (role_doc(instances=2), f"{W}.instances", "here it is 'taskNumber'"),
    (role_doc(commands=["x"]), f"{W}.commands", "'command'"),
    (role_doc(images="x"), f"{W}.images", "did you mean 'image'?"),
    (role_doc(image="a b"), f"{W}.image", "without spaces"),
]


def errors_of(document: object) -> list[FieldError]:
    with pytest.raises(SpecError) as caught:
        parse_job_spec(document)
    return caught.value.errors


@pytest.mark.parametrize(("document", "path", "words"), BAD_FIELDS + UNKNOWN_FIELDS)
def test_bad_field_gives_its_path_and_a_readable_message(document, path, words):
    errors = errors_of(document)
    assert [e.path for e in errors] == [path], errors
    assert words in errors[0].message


@pytest.mark.parametrize(("document", "path", "words"), BAD_FIELDS + UNKNOWN_FIELDS)
def test_no_parser_jargon(document, path, words):
    for error in errors_of(document):
        for jargon in ("int_parsing", "missing", "Traceback", "pydantic", "NoneType", "dict"):
            assert jargon not in error.message


def test_every_bad_field_is_reported_at_once():
    text = """
name: -bad
retry_count: 3
env: {GPUYARD_X: 1, OK: [1]}
maxRuntime: 2 hours
taskRoles:
  worker:
    taskNumber: 0
    cpuNumber: -1
    memoryMB: lots
    gpuNumber: two
  9ps: {command: x}
  eval: oops
"""
    with pytest.raises(SpecError) as caught:
        load_job_spec(text)
    paths = sorted(e.path for e in caught.value.errors)
    assert paths == sorted(
        [
            "name",
            "retry_count",
            "env.GPUYARD_X",
            "env.OK",
            "maxRuntime",
            "taskRoles.worker.taskNumber",
            "taskRoles.worker.cpuNumber",
            "taskRoles.worker.memoryMB",
            "taskRoles.worker.gpuNumber",
            "taskRoles.worker.command",
            "taskRoles.9ps",
            "taskRoles.eval",
        ]
    )
    lines = str(caught.value).splitlines()
    assert len(lines) == len(caught.value.errors)
    assert (
        "taskRoles.worker.gpuNumber: must be a whole number ≥ 0, or a fraction of one GPU"
        " like 0.5, got 'two'"
    ) in lines


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ("name: x\ntaskRoles: [\n", "YAML syntax error at line 3, column 1"),
        ("name: x\n  bad: indent\n", "YAML syntax error at line 2, column 6"),
        ("name: x\n\tb: 1\n", "YAML syntax error at line 2, column 1"),
        ("name: a\nname: b\n", "line 2, column 1: the key 'name' is given twice"),
        ("a: 1\n---\nb: 2\n", "expected a single document in the stream, but found another"),
        ("name: *nothing\n", "YAML syntax error at line 1"),
        ('{"name": "x"\n', "YAML syntax error at line 2, column 1: expected ',' or '}'"),
    ],
)
def test_yaml_syntax_errors_have_line_and_column(body, words):
    with pytest.raises(SpecError) as caught:
        load_job_spec(body)
    [error] = caught.value.errors
    assert error.path == ""
    assert words in error.message


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ('{"name": "x", }', "JSON syntax error at line 1, column 15"),
        ('{"name": "x", "name": "y"}', "the key 'name' is given twice"),
        ("name: x", "JSON syntax error at line 1, column 1"),
    ],
)
def test_declared_json_errors(body, words):
    with pytest.raises(SpecError) as caught:
        load_job_spec(body, "application/json")
    [error] = caught.value.errors
    assert (error.path, words in error.message) == ("", True), error


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ("", "the spec is empty"),
        ("# only a comment\n", "the spec is empty"),
        (
            "- name: x\n",
            "must be a mapping of fields, like name: ... and taskRoles: ..., got a list",
        ),
        ("just a sentence", "got 'just a sentence'"),
        ("42", "got 42"),
        ("[1, 2]", "got a list"),
        (b"\xff\xfe\x00", "not UTF-8 text"),
        ("[" * 5000, "nested too deeply"),
        ("x" * (MAX_SPEC_BYTES + 1), "at most"),
    ],
)
def test_body_that_is_not_a_mapping(body, words):
    with pytest.raises(SpecError) as caught:
        load_job_spec(body)
    [error] = caught.value.errors
    assert error.path == ""
    assert words in error.message


def test_spec_error_as_json_list():
    error = SpecError([FieldError("name", "is required: the job's name"), FieldError("", "x")])
    assert error.to_list() == [
        {"path": "name", "message": "is required: the job's name"},
        {"path": "", "message": "x"},
    ]
    assert str(error) == "name: is required: the job's name\nx"


@pytest.mark.parametrize(
    ("body", "path", "words"),
    [
        ("name: x\n1: 2\ntaskRoles: {w: {command: c}}", "1", "unknown field"),
        ("name: x\ntaskRoles: {1: {command: c}}", "taskRoles.1", "not a valid role name"),
        ("name: x\nenv: {3: x}\ntaskRoles: {w: {command: c}}", "env.3", "variable name"),
        ("name: x\ntaskRoles: {w: {command: [a, 2]}}", "taskRoles.w.command[1]", "got 2"),
        ("name: no\ntaskRoles: {w: {command: c}}", "name", "got false (YAML reads unquoted"),
        (
            "name: x\ntaskRoles: {w: {command: c, gpuNumber: .inf}}",
            "taskRoles.w.gpuNumber",
            "got infinity",
        ),
    ],
)
def test_yaml_keys_and_values_that_are_not_strings(body, path, words):
    with pytest.raises(SpecError) as caught:
        load_job_spec(body)
    [error] = caught.value.errors
    assert (error.path, words in error.message) == (path, True), error
