"""`gpuyard run` (docs/interactive.md) without a server: the dispatcher sends it to its own
module; the job it submits; its usage errors and refusals; and `gpuyard --help` lists the
commands that parse their own arguments (`exec`, `port-forward`, `run`), each pointing to
its own `--help`, which also works through the typer command line."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from gpuyard.cli import fastrun
from gpuyard.cli.basics import ApiError
from gpuyard.cli.full import app
from gpuyard.cli.full import main as full_main
from gpuyard.entry import route


@pytest.mark.parametrize("argv", [
    ["run", "--", "bash"],
    ["--url", "http://h:1", "run", "--gpus", "1", "--", "python3", "-c", "--help"],
    ["run", "--help"],
])
def test_run_goes_to_its_own_module(argv):
    assert route(argv) == "gpuyard.cli.fastrun"


def test_the_full_help_lists_the_commands_with_their_own_parser():
    result = CliRunner().invoke(app, ["--help"], prog_name="gpuyard", env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    lines = {line.split()[1]: line for line in result.output.splitlines()
             if line.startswith("│ ") and len(line.split()) > 2}
    for name in ("exec", "port-forward", "run"):
        assert f"(gpuyard {name} --help)" in lines[name], result.output


@pytest.mark.parametrize("name", ["exec", "port-forward", "run"])
def test_their_help_through_typer_is_their_own(name, capsys):
    with pytest.raises(SystemExit) as done:
        full_main([name, "--help"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: gpuyard {name} ")


def test_the_job_is_one_interactive_task_with_what_was_asked():
    args = fastrun.run_parser().parse_args(["--gpus", "0.5", "--memory", "2048", "--tenant", "t"])
    job = fastrun.job_document(args, ["python3", "-c", "print('a b')"])
    assert job == {
        "name": "run-python3",
        "interactive": True,
        "tenant": "t",
        "taskRoles": {"main": {"command": "python3 -c 'print('\"'\"'a b'\"'\"')'",
                               "gpuNumber": 0.5, "memoryMB": 2048}},
    }
    args = fastrun.run_parser().parse_args(["--gpus", "2", "--image", "img:1", "--name", "x"])
    job = fastrun.job_document(args, ["sh"])
    assert (job["name"], job["image"], job["taskRoles"]["main"]["gpuNumber"]) == ("x", "img:1", 2)


@pytest.mark.parametrize(("command", "name"), [
    (["/usr/bin/python3.11"], "run-python3.11"),
    (["./my script!"], "run-my-script"),
    (["..."], "run-command"),
    (["x" * 100], "run-" + "x" * 59),
])
def test_the_default_name_is_a_valid_job_name(command, name):
    assert fastrun.default_name(command) == name


def test_no_command_is_a_usage_error(capsys):
    assert fastrun.main(["run", "--gpus", "1"]) == 2
    assert "run needs a command after --" in capsys.readouterr().err


def test_a_refused_job_names_the_options(capsys):
    refused = ApiError(422, "the spec has 1 error", [
        {"path": "taskRoles.main.gpuNumber", "message": "must be at most 64"}])
    assert fastrun.submit_refused(refused, tenant_given=False) == 2
    assert "  --gpus: must be at most 64" in capsys.readouterr().err
    forbidden = ApiError(403, "alice is not a member of tenant default")
    assert fastrun.submit_refused(forbidden, tenant_given=False) == 1
    assert "unless --tenant names yours" in capsys.readouterr().err


def test_progress_is_said_on_stderr_once_per_sentence(capsys):
    say = fastrun.Progress("j1", gpus=True)
    say({"state": "QUEUED", "code": None, "reason": None})  # not looked at yet: nothing
    for _ in range(2):
        say({"state": "QUEUED", "code": "QuotaExceeded", "reason": "tenant t uses 4 of its 4 GPUs"})
    say({"state": "SCHEDULED", "code": "PullingImage", "reason": "pulling image x"})
    assert capsys.readouterr().err.splitlines() == [
        "gpuyard run: job j1 waiting for a GPU: tenant t uses 4 of its 4 GPUs",
        "gpuyard run: job j1 starting: pulling image x",
    ]
