"""Command-line parsing helpers and the words and exit codes of expected failures."""

from __future__ import annotations

import pytest
import typer
from cli_samples import closed_port
from typer.testing import CliRunner

from gpuyard.cli.client import ApiError
from gpuyard.cli.main import (
    EXIT_UNREACHABLE,
    app,
    error_message,
    normalize_url,
    parse_states,
    parse_task,
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("worker/0", "worker/0"), ("ps/12", "ps/12"), ("worker", "worker/0"),
     (" chief/1 ", "chief/1"), ("worker/007", "worker/7"), (None, None)],
)
def test_parse_task(value: str | None, expected: str | None) -> None:
    assert parse_task(value) == expected


@pytest.mark.parametrize("value", ["", "/0", "worker/", "worker/x", "worker/-1", "a/b/c",
                                   "my worker/0"])
def test_parse_task_rejects(value: str) -> None:
    with pytest.raises(typer.BadParameter, match="ROLE/INDEX"):
        parse_task(value)


def test_parse_states() -> None:
    assert parse_states(["running", " Queued"]) == ["RUNNING", "QUEUED"]
    assert parse_states(None) is None
    with pytest.raises(typer.BadParameter, match="not one of"):
        parse_states(["DONE"])


def test_normalize_url() -> None:
    assert normalize_url("127.0.0.1:8080") == "http://127.0.0.1:8080"
    assert normalize_url("https://yard.example/ ") == "https://yard.example"


def test_error_messages() -> None:
    assert error_message(ApiError(404, "not found"), "j-9") == "no job j-9"
    assert error_message(ApiError(404, "no task ps/3"), None) == "error: no task ps/3 (HTTP 404)"
    assert error_message(ApiError(403, "tenant vision may not read jobs of tenant nlp"), "j-1") == (
        "error: tenant vision may not read jobs of tenant nlp (HTTP 403)")


UNREACHABLE_COMMANDS = [
    ["jobs"], ["jobs", "-o", "json"], ["show", "j-1"], ["logs", "j-1"],
    ["logs", "j-1", "-f", "--task", "worker/0"], ["cancel", "j-1"], ["nodes"],
]


@pytest.mark.parametrize("args", UNREACHABLE_COMMANDS)
def test_refused_connection_is_explained(args: list[str]) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    result = CliRunner().invoke(app, ["--url", url, *args])
    assert result.exit_code == EXIT_UNREACHABLE
    assert result.stderr.strip() == (
        f"cannot reach gpuyard at {url}: is the server running? "
        "start it with `make run` or `gpuyard up`"
    )
    assert "Traceback" not in result.output
    assert result.stdout == ""


def test_refused_submit_and_url_from_environment(tmp_path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: x\n")
    url = f"http://127.0.0.1:{closed_port()}"
    result = CliRunner().invoke(app, ["submit", str(spec), "--wait"], env={"GPUYARD_URL": url})
    assert result.exit_code == EXIT_UNREACHABLE
    assert f"cannot reach gpuyard at {url}" in result.stderr


def test_bad_task_is_a_usage_error() -> None:
    result = CliRunner().invoke(app, ["logs", "j-1", "--task", "worker/x"])
    assert result.exit_code == 2
    assert "ROLE/INDEX" in result.output


def test_missing_spec_file_is_a_usage_error(tmp_path) -> None:
    result = CliRunner().invoke(app, ["submit", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2
