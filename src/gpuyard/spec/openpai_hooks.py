"""What runs around an OpenPAI role's commands: `cmd` runtime plugins and cmd prerequisites.

- `extras.com.microsoft.pai.runtimeplugin: [{plugin: cmd, parameters: {preCommands: [...],
  postCommands: [...]}, taskroles: [...], failurePolicy: fail|ignore}]`: OpenPAI's `cmd`
  plugin (kube-runtime `plugins/cmd`): its pre commands run before the role's commands, its
  post commands after they succeed; `taskroles` limits it to those roles.
- A role's `prerequisites: [name, ...]` naming top-level prerequisites with `plugin:
  com.microsoft.pai.runtimeplugin.cmd` and `callbacks: [{event: taskStarts | taskSucceeds,
  commands: [...]}]`: taskStarts commands run in the listed order before the role's commands,
  taskSucceeds ones in reverse order after them; `require: [names]` come first.

`ssh` becomes our `ssh` field (openpai_plugins.py), `teamwise_storage` our `storage`
(openpai_storage.py); `tensorboard` a hook that starts TensorBoard and our `services`
(openpai_tensorboard.py); other plugins are accepted with a warning (unknown). Commands may hold
`<% $parameters.x %>` references like the role's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuyard.spec.errors import Errors, got, item, join
from gpuyard.spec.notices import Warnings
from gpuyard.spec.openpai_script import Hook
from gpuyard.spec.openpai_tensorboard import TENSORBOARD_PLUGIN, board_hook, read_board
from gpuyard.spec.templates import substitute

PLUGINS_KEY = "com.microsoft.pai.runtimeplugin"
PLUGINS_PATH = f"extras.{PLUGINS_KEY}"
CMD_PLUGIN = "cmd"
CMD_PREREQUISITE_PLUGIN = "com.microsoft.pai.runtimeplugin.cmd"
NOT_RUN_YET: dict[str, str] = {}  # known plugins not run yet: name → what happens
CONVERTED = ("ssh", "teamwise_storage")  # our `ssh`, `storage` (openpai_plugins.py, _storage.py)
EVENTS = {"taskStarts": "before", "taskSucceeds": "after"}
FAILURE_POLICIES = ("fail", "ignore")


@dataclass
class Scope:
    """What a role's hooks are rendered with: its references, and what they used."""

    values: dict[str, Any]
    quiet: set[str]
    used: set[str] = field(default_factory=set)


@dataclass
class RoleHooks:
    before: list[Hook] = field(default_factory=list)
    after: list[Hook] = field(default_factory=list)  # in the order they run


def _lines(errs: Errors, scope: Scope, path: str, value: object) -> tuple[str, ...] | None:
    """A list of command strings, substituted; None after an error."""
    if not isinstance(value, list) or not all(isinstance(line, str) for line in value):
        errs.add(path, f"must be a list of command strings{got(value)}")
        return None
    return tuple(
        substitute(errs, item(path, i), line, scope.values, scope.quiet, scope.used)
        for i, line in enumerate(value)
    )


def _failure_policy(errs: Errors, path: str, entry: dict[Any, Any]) -> bool:
    """True for `failurePolicy: ignore`; an error for a value that is neither."""
    policy = entry.get("failurePolicy", "fail")
    if policy not in FAILURE_POLICIES:
        errs.add(join(path, "failurePolicy"), f"must be fail or ignore{got(policy)}")
    return policy == "ignore"


def check_plugins(errs: Errors, warns: Warnings, value: object) -> list[tuple[int, dict]]:
    """The `cmd` plugins and the first `tensorboard` one (index, entry); errors for a
    tensorboard plugin's parameters, warnings for the others."""
    if value is None:
        return []
    if not isinstance(value, list):
        errs.add(PLUGINS_PATH, f"must be a list of {{plugin, parameters}} items{got(value)}")
        return []
    out = []
    for i, entry in enumerate(value):
        where = item(PLUGINS_PATH, i)
        name = entry.get("plugin") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name:
            errs.add(where, f"must be a mapping with plugin (its name) and parameters{got(entry)}")
        elif name == CMD_PLUGIN:
            out.append((i, entry))
        elif name == TENSORBOARD_PLUGIN:
            if any(e.get("plugin") == TENSORBOARD_PLUGIN for _, e in out):
                message = "a second tensorboard plugin: only the first is run"
                warns.add(join(where, "plugin"), message)
            elif read_board(errs, warns, where, entry) is not None:
                out.append((i, entry))
        elif name not in CONVERTED:
            message = NOT_RUN_YET.get(name, f"unknown plugin {name!r}: not run")
            warns.add(join(where, "plugin"), message)
    return out


def _applies(entry: dict[Any, Any], role: str) -> bool:
    roles = entry.get("taskroles")
    return not isinstance(roles, list) or role in roles


def _cmd_plugin(errs: Errors, scope: Scope, i: int, entry: dict, hooks: RoleHooks) -> None:
    where = item(PLUGINS_PATH, i)
    ignore = _failure_policy(errs, where, entry)
    params = entry.get("parameters") or {}
    if not isinstance(params, dict):
        errs.add(join(where, "parameters"), f"must be a mapping with preCommands{got(params)}")
        return
    for key, kind in (("preCommands", "before"), ("postCommands", "after")):
        path = join(join(where, "parameters"), key)
        if params.get(key) is not None and (lines := _lines(errs, scope, path, params[key])):
            getattr(hooks, kind).append(Hook(path, lines, ignore))
    _callbacks(errs, scope, join(where, "parameters"), params, ignore, hooks)


def _callbacks(
    errs: Errors, scope: Scope, where: str, entry: dict, ignore: bool, hooks: RoleHooks
) -> None:
    """`callbacks: [{event, commands}]` of a cmd plugin or prerequisite."""
    value = entry.get("callbacks")
    if value is None:
        return
    if not isinstance(value, list):
        errs.add(join(where, "callbacks"), f"must be a list of {{event, commands}}{got(value)}")
        return
    for j, callback in enumerate(value):
        path = item(join(where, "callbacks"), j)
        event = callback.get("event") if isinstance(callback, dict) else None
        if not isinstance(callback, dict) or not isinstance(event, str) or event not in EVENTS:
            errs.add(join(path, "event"), f"must be taskStarts or taskSucceeds{got(event)}")
            continue
        lines = _lines(errs, scope, join(path, "commands"), callback.get("commands"))
        if lines:
            getattr(hooks, EVENTS[event]).append(Hook(join(path, "commands"), lines, ignore))


def plugin_hooks(errs: Errors, scope: Scope, plugins: list, role: str) -> RoleHooks:
    """The role's hooks from the `cmd` plugins that apply to it; post hooks in reverse."""
    hooks = RoleHooks()
    for i, entry in plugins:
        if not _applies(entry, role):
            continue
        if entry.get("plugin") == TENSORBOARD_PLUGIN:  # checked by check_plugins already
            board = read_board(Errors(), Warnings(), item(PLUGINS_PATH, i), entry)
            if board is not None:
                hooks.before.append(board_hook(item(PLUGINS_PATH, i), board))
        else:
            _cmd_plugin(errs, scope, i, entry, hooks)
    hooks.after.reverse()
    return hooks


def _with_requires(names: list[str], index: dict[str, int], docs: list) -> list[str]:
    """`names` with each one's `require` first (depth first, each once, cycles cut)."""
    out: list[str] = []

    def visit(name: str, stack: tuple[str, ...]) -> None:
        if name in out or name in stack or name not in index:
            return
        required = docs[index[name]].get("require")
        for other in required if isinstance(required, list) else []:
            if isinstance(other, str):
                visit(other, (*stack, name))
        out.append(name)

    for name in names:
        visit(name, ())
    return out


def _role_prerequisite_names(errs: Errors, path: str, value: object, index: dict) -> list[str]:
    where = join(path, "prerequisites")
    if not isinstance(value, list):
        errs.add(where, f"must be a list of prerequisite names{got(value)}")
        return []
    names = []
    for i, name in enumerate(value):
        if not isinstance(name, str) or name not in index:
            known = ", ".join(index) or "none defined"
            errs.add(item(where, i), f"must name a prerequisite ({known}){got(name)}")
        else:
            names.append(name)
    return names


def prerequisite_hooks(
    errs: Errors, warns: Warnings, scope: Scope, path: str, role: dict, docs: list
) -> RoleHooks:
    """The hooks of the role's `prerequisites: [names]` (cmd callbacks), requires first."""
    hooks = RoleHooks()
    if role.get("prerequisites") is None:
        return hooks
    index = {
        d["name"]: i
        for i, d in enumerate(docs)
        if isinstance(d, dict) and isinstance(d.get("name"), str)
    }
    names = _role_prerequisite_names(errs, path, role["prerequisites"], index)
    for name in _with_requires(names, index, docs):
        where, entry = item("prerequisites", index[name]), docs[index[name]]
        plugin = entry.get("plugin")
        if plugin == CMD_PREREQUISITE_PLUGIN:
            _callbacks(errs, scope, where, entry, _failure_policy(errs, where, entry), hooks)
        elif plugin is not None:
            warns.add(join(where, "plugin"), f"unknown prerequisite plugin {plugin!r}: not run")
        elif entry.get("callbacks") is not None:
            warns.add(join(where, "callbacks"), f"not run: no plugin ({CMD_PREREQUISITE_PLUGIN})")
    hooks.after.reverse()
    return hooks
