"""OpenPAI's `tensorboard` runtime plugin: TensorBoard started in the task, served through
the platform as the job's service `tensorboard` (docs/openpai.md, *TensorBoard*).

`{plugin: tensorboard, parameters: {port: 11449, logdir: {name1: path1, name2: path2}},
taskroles: [...]}` (kube-runtime `plugins/tensorboard`): OpenPAI appends `tensorboard
--logdir=name1:path1,... --port=PORT &` to the task's pre script. Here:

- each task of the roles it applies to (`taskroles`, else all) starts TensorBoard in the
  background before the role's commands (a hook of the role's script, openpai_script.py),
  with `--logdir PATH` for one log dir, `--logdir_spec name1:path1,...` for several (what
  TensorBoard 2 takes for named dirs; OpenPAI's `--logdir` form is TensorBoard 1's), on its
  loopback (`--host 127.0.0.1`: the platform's proxy connects there) and `port`
  (default 6006);
- only where the image has `tensorboard` on its PATH; otherwise the task's log says so, and
  the task runs on (OpenPAI would fail its pre script: its images are expected to have it);
- the first of those tasks (its first role's task 0) serves our `services: {tensorboard:
  {port, task}}`: the job page links it, for whoever may open the job's services.

No `parameters` (or an empty mapping): nothing is started, as OpenPAI skips it. A second
tensorboard plugin is a warning (only the first is run).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from gpuyard.spec.errors import Errors, got, join
from gpuyard.spec.notices import Warnings
from gpuyard.spec.openpai_script import Hook

TENSORBOARD_PLUGIN = "tensorboard"
SERVICE = "tensorboard"  # the service's name (docs/services.md)
DEFAULT_PORT = 6006
PARAMETERS = ("port", "logdir")
MISSING = (
    "gpuyard tensorboard: no tensorboard on the PATH of this image: TensorBoard is not "
    "started (the service tensorboard will not answer); use an image that has it"
)


@dataclass(frozen=True)
class Board:
    """One tensorboard plugin: its port, its log dirs (name, path), the roles it runs in."""

    port: int
    logdirs: tuple[tuple[str, str], ...]
    roles: tuple[str, ...]  # empty: all


def _port(errs: Errors, where: str, value: object) -> int:
    if value is None:
        return DEFAULT_PORT
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536:
        errs.add(where, f"must be a port number from 1 to 65535{got(value)}")
        return DEFAULT_PORT
    return value


def _logdirs(errs: Errors, where: str, value: object) -> tuple[tuple[str, str], ...]:
    if isinstance(value, str) and value:
        return (("", value),)
    if not isinstance(value, dict) or not value:
        errs.add(where, f"must be a mapping of NAME: PATH, like {{train: /mnt/tb}}{got(value)}")
        return ()
    out = []
    for name, path in value.items():
        if not isinstance(name, str) or not name or ":" in name or "," in name:
            errs.add(join(where, str(name)), "must be a name without ':' or ','")
        elif not isinstance(path, str) or not path or "," in path:
            errs.add(join(where, name), f"must be a path without ','{got(path)}")
        else:
            out.append((name, path))
    return tuple(out)


def read_board(errs: Errors, warns: Warnings, where: str, entry: dict[Any, Any]) -> Board | None:
    """The plugin's settings; None when it starts nothing (no parameters) or has errors."""
    params = entry.get("parameters")
    where_params = join(where, "parameters")
    if params is None or params == {}:
        return None
    if not isinstance(params, dict):
        errs.add(where_params, f"must be a mapping with port and logdir{got(params)}")
        return None
    for key in params:
        if key not in PARAMETERS:
            message = "unknown tensorboard plugin parameter: not used"
            warns.add(join(where_params, str(key)), message)
    before = len(errs.items)
    port = _port(errs, join(where_params, "port"), params.get("port"))
    logdirs = _logdirs(errs, join(where_params, "logdir"), params.get("logdir"))
    if len(errs.items) > before:
        return None
    roles = entry.get("taskroles")
    names = tuple(r for r in roles if isinstance(r, str)) if isinstance(roles, list) else ()
    return Board(port, logdirs, names)


def command_line(board: Board) -> str:
    """`tensorboard ... &`, every value quoted for the shell."""
    if len(board.logdirs) == 1:
        dirs = ["--logdir", board.logdirs[0][1]]
    else:
        dirs = ["--logdir_spec", ",".join(f"{name}:{path}" for name, path in board.logdirs)]
    argv = ["tensorboard", *dirs, "--host", "127.0.0.1", "--port", str(board.port)]
    return shlex.join(argv) + " &"


def board_hook(where: str, board: Board) -> Hook:
    """The lines a task runs before its role's commands: TensorBoard in the background, or
    a line in its log saying why not."""
    lines = (
        "if command -v tensorboard >/dev/null 2>&1; then",
        f"  {command_line(board)}",
        "else",
        f"  echo {shlex.quote(MISSING)} >&2",
        "fi",
    )
    return Hook(f"{where}: TensorBoard, the service {SERVICE}", lines)


def serving_task(board: Board, roles: list[str]) -> str | None:
    """The task the service points at: the first role it runs in, task 0."""
    chosen = [r for r in roles if not board.roles or r in board.roles]
    return f"{chosen[0]}/0" if chosen else None


def service_fields(board: Board, roles: list[str]) -> dict[str, Any]:
    """Our `services` for the plugin (empty when it runs in no role of the job)."""
    task = serving_task(board, roles)
    if task is None:
        return {}
    return {"services": {SERVICE: {"port": board.port, "task": task}}}
