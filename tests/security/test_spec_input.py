"""Hostile job specs answer 422 with the field's path, never 500, never accepted half-read
(issue 15, items 1 and 8): integers past Python's int-text limit, host paths the kernel
would refuse (NUL, newline, a component over 255 bytes, over 4096 bytes in all), paths whose
resolution fails (EACCES), NUL bytes in commands and env values. Refusals never print where
a path leads outside the tenant's roots (`/proc/self/fd/N` named the database)."""

from __future__ import annotations

import json
import os

import pytest

from api.conftest import spec

HUGE = "9" * 5000  # Python refuses to convert more than 4300 digits


def submit_json(w, who: str, doc: dict | str):
    body = doc if isinstance(doc, str) else json.dumps(doc)
    return w.call(
        who, "POST", "/api/v1/jobs", content=body, headers={"Content-Type": "application/json"}
    )


def job(**fields: object) -> dict:
    return {"name": "x", "tenant": "red", "taskRoles": {"main": {"command": "true"}}, **fields}


def only_error(r) -> dict:
    assert r.status_code == 422, r.text
    (error,) = r.json()["errors"]
    return error


@pytest.mark.parametrize("field", ["priority", "retryCount", "maxRuntime"])
def test_an_integer_of_5000_digits_in_json_is_a_422_at_its_field(shared_world, field):
    body = json.dumps(job(**{field: 1})).replace(f'"{field}": 1', f'"{field}": {HUGE}')
    error = only_error(submit_json(shared_world, "alice", body))
    assert error["path"] == field
    assert "a number of 5000 digits" in error["message"]


def test_an_integer_of_5000_digits_in_yaml_is_a_422_at_its_field(shared_world):
    r = shared_world.submit("alice", spec("red", extra=f"priority: {HUGE}\n"))
    assert only_error(r)["path"] == "priority"


def test_a_duration_of_5000_digits_is_a_422(shared_world):
    error = only_error(submit_json(shared_world, "alice", job(maxRuntime=f"{HUGE}s")))
    assert error["path"] == "maxRuntime"


def test_an_openpai_index_of_5000_digits_is_a_422(shared_world):
    doc = {
        "protocolVersion": 2,
        "name": "x",
        "defaults": {"virtualCluster": "red"},
        "parameters": {"p": ["a"]},
        "taskRoles": {"main": {"commands": [f"echo <% $parameters.p[{HUGE}] %>"]}},
    }
    assert only_error(submit_json(shared_world, "alice", doc))["path"] == (
        "taskRoles.main.commands[0]"
    )


@pytest.mark.parametrize(
    ("tail", "words"),
    [
        ("/" + "a" * 256, "at most 255 bytes"),
        ("/" + "é" * 128, "at most 255 bytes"),  # 128 characters, 256 bytes
        ("/a" * 2100, "at most 4096 bytes"),
        ("/a\nb", "NUL byte or a newline"),
        ("/a\x00b", "NUL byte or a newline"),
    ],
)
@pytest.mark.parametrize("field", ["dataDir", "outputDir"])
def test_a_host_path_the_kernel_would_refuse_is_a_422_at_submit(shared_world, field, tail, words):
    r = submit_json(shared_world, "alice", job(**{field: f"{shared_world.storage}{tail}"}))
    error = only_error(r)
    assert error["path"] == field
    assert words in error["message"]


def test_a_component_of_255_bytes_is_fine(world):
    r = submit_json(world, "alice", job(outputDir=f"{world.storage}/{'a' * 255}"))
    assert r.status_code == 201, r.text


def test_a_path_whose_resolution_fails_is_a_422_not_a_500(shared_world):
    """/proc/1/exe: readlink is EACCES for a process one may not trace (and anywhere it
    resolves, it is outside the roots): either way a 422 at dataDir."""
    error = only_error(submit_json(shared_world, "alice", job(dataDir="/proc/1/exe")))
    assert error["path"] == "dataDir"
    assert error["message"].startswith("/proc/1/exe ")


def database_fd() -> int:
    """An fd of this process open on the store's SQLite database."""
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}").endswith("gpuyard.db"):
                return int(name)
        except OSError:
            continue
    raise AssertionError("no fd on the database")


@pytest.mark.parametrize("field", ["dataDir", "outputDir"])
def test_a_refusal_never_says_where_a_path_leads(shared_world, field):
    for path in (f"/proc/self/fd/{database_fd()}", "/proc/self/cwd"):
        message = only_error(submit_json(shared_world, "alice", job(**{field: path})))["message"]
        assert message.startswith(f"{path} (after following its links) is outside")
        assert "gpuyard.db" not in message
        assert os.getcwd() not in message


@pytest.mark.parametrize(
    ("command", "path"),
    [
        ("echo safe\x00; rm -rf /output", "taskRoles.main.command"),
        (["echo one", "echo two\x00 three"], "taskRoles.main.command[1]"),
    ],
)
def test_a_nul_byte_in_a_command_is_a_422_not_a_shorter_command(shared_world, command, path):
    doc = job(taskRoles={"main": {"command": command}})
    error = only_error(submit_json(shared_world, "alice", doc))
    assert error["path"] == path
    assert "NUL" in error["message"]


@pytest.mark.parametrize("value", ["a\x00b", {"secret": "a\x00b"}])
def test_a_nul_byte_in_an_env_value_is_a_422(shared_world, value):
    error = only_error(submit_json(shared_world, "alice", job(env={"TOKEN": value})))
    assert error["path"] == "env.TOKEN"


def test_a_webhook_with_a_control_character_is_a_422(shared_world):
    r = submit_json(shared_world, "alice", job(webhook="https://example.com/a\x00b"))
    assert only_error(r)["path"] == "webhook"
