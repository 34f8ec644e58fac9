"""OpenPAI's tensorboard plugin: started before the commands of the roles it applies to only,
on the task's loopback, with TensorBoard 2's flag for named log dirs; a line in the task's
log where the image has no tensorboard (run here with /bin/sh and a PATH without it); the
job's service `tensorboard` on the first such task; no parameters start nothing; a second
plugin is a warning. The corpus (openpai_corpus/tensorboard*.yaml) has the rest."""

from __future__ import annotations

import subprocess

from gpuyard.spec.openpai import convert_openpai
from gpuyard.spec.openpai_tensorboard import MISSING, Board, board_hook, command_line

PLUGINS = "com.microsoft.pai.runtimeplugin"


def document(*plugins: dict) -> dict:
    role = {"resourcePerInstance": {"cpu": 1, "memoryMB": 256, "gpu": 0}, "commands": ["true"]}
    return {
        "protocolVersion": 2, "name": "tb", "type": "job",
        "taskRoles": {"ps": dict(role), "worker": {**role, "instances": 2}},
        "extras": {PLUGINS: list(plugins)},
    }  # fmt: skip


def test_it_runs_in_the_roles_it_names_and_serves_from_the_first_of_them() -> None:
    params = {"port": 7000, "logdir": {"run": "/mnt/tb"}}
    spec, warnings = convert_openpai(
        document({"plugin": "tensorboard", "taskroles": ["worker"], "parameters": params})
    )
    assert warnings == []
    assert "tensorboard" not in str(spec.task_roles["ps"].command)
    assert "tensorboard --logdir /mnt/tb --host 127.0.0.1 --port 7000 &" in str(
        spec.task_roles["worker"].command
    )
    assert [(s.name, s.port, s.task) for s in spec.services] == [("tensorboard", 7000, "worker/0")]


def test_without_parameters_nothing_starts_and_a_second_plugin_is_a_warning() -> None:
    spec, warnings = convert_openpai(document({"plugin": "tensorboard"}))
    assert warnings == [] and not spec.services
    assert "tensorboard" not in str(spec.task_roles["worker"].command)
    first = {"plugin": "tensorboard", "parameters": {"logdir": "/a"}}
    spec, warnings = convert_openpai(document(first, {**first, "parameters": {"logdir": "/b"}}))
    assert [w.path for w in warnings] == [f"extras.{PLUGINS}[1].plugin"]
    assert spec.services[0].port == 6006 and "/b" not in str(spec.task_roles["ps"].command)


def test_named_log_dirs_use_logdir_spec_and_every_value_is_quoted() -> None:
    board = Board(6006, (("a", "/x y"), ("b", "/$(z)")), ())
    assert command_line(board) == (
        "tensorboard --logdir_spec 'a:/x y,b:/$(z)' --host 127.0.0.1 --port 6006 &"
    )


def test_an_image_without_tensorboard_says_so_in_the_log_and_runs_on() -> None:
    hook = board_hook("here", Board(6006, (("", "/tb"),), ()))
    script = "\n".join(["set -e", "(", *hook.lines, ")", "echo the-command-ran"])
    done = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, check=False,
                          env={"PATH": "/nonexistent"}, timeout=10)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "the-command-ran\n" and done.stderr.strip() == MISSING
