"""OpenPAI's `ssh` runtime plugin → our `ssh` field (and the `tensorboard` plugin → our
`services`, openpai_tensorboard.py).

- `{plugin: ssh, parameters: {jobssh, userssh: {type, value}, sshbarrier, sshbarrierTimeout},
  taskroles, failurePolicy}` (kube-runtime `plugins/ssh`): `jobssh: true` gives every task the
  job's key pair, `userssh` of type `custom` adds the user's public key; both absent or false,
  or no parameters: no sshd, as OpenPAI skips it. `sshbarrierTimeout` is in minutes. `type:
  system` (a key kept in OpenPAI's user profile) has no counterpart here: a warning. With
  `extras.gangAllocation: false`, OpenPAI turns jobssh off: so does gpuyard, with a warning.
  `taskroles` limits sshd to those roles; `failurePolicy: ignore` lets a task run on when its
  sshd does not start.

Paths of errors are OpenPAI's (`extras.com.microsoft.pai.runtimeplugin[1].parameters.userssh.
value`); the job's converted spec holds what runs.
"""

from __future__ import annotations

from typing import Any

from gpuyard.spec.errors import Errors, got, item, join
from gpuyard.spec.fields import as_number
from gpuyard.spec.notices import Warnings
from gpuyard.spec.openpai_hooks import PLUGINS_PATH
from gpuyard.spec.openpai_tensorboard import (
    SERVICE,
    TENSORBOARD_PLUGIN,
    read_board,
    service_fields,
)
from gpuyard.spec.runtimeplugins import DEFAULT_BARRIER_S, public_key_lines

SSH_PLUGIN = "ssh"
SSH_PARAMETERS = ("jobssh", "userssh", "sshbarrier", "sshbarrierTimeout", "sshbarriertaskroles")
MAX_BARRIER_MINUTES = 7 * 24 * 60


def _truthy(value: object) -> bool:
    """OpenPAI reads these flags as `str(value).lower() == "true"`."""
    return str(value).lower() == "true"


def _user_keys(errs: Errors, warns: Warnings, where: str, value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, dict) or "type" not in value or "value" not in value:
        warns.add(where, f"not used: must be a mapping with type and value{got(value)}")
        return ()
    kind = value.get("type")
    if kind == "custom":
        return public_key_lines(errs, join(where, "value"), value.get("value"))
    if kind == "system":
        warns.add(join(where, "type"), "keys kept in OpenPAI's user profile do not exist here: "
                  "not added (give the public key with type custom)")  # fmt: skip
    else:
        message = f"unknown userssh type: not used (custom or system){got(kind)}"
        warns.add(join(where, "type"), message)
    return ()


def _barrier_s(errs: Errors, where: str, params: dict[Any, Any]) -> int:
    value = params.get("sshbarrierTimeout")
    if value is None:
        return DEFAULT_BARRIER_S
    minutes = as_number(value)
    if minutes is None or not 0 < minutes <= MAX_BARRIER_MINUTES:
        rule = f"a number of minutes from 0 to {MAX_BARRIER_MINUTES}"
        errs.add(join(where, "sshbarrierTimeout"), f"must be {rule}{got(value)}")
        return DEFAULT_BARRIER_S
    return max(1, round(minutes * 60))


def _ssh(errs: Errors, warns: Warnings, where: str, entry: dict, ungang: bool) -> dict | None:
    """Our `ssh` document for one ssh plugin entry (None: OpenPAI would not start sshd)."""
    params = entry.get("parameters")
    where_params = join(where, "parameters")
    if not isinstance(params, dict) or not params:
        if params is not None and not isinstance(params, dict):
            errs.add(where_params, f"must be a mapping with jobssh and userssh{got(params)}")
        return None
    for key in params:
        if key not in SSH_PARAMETERS:
            warns.add(join(where_params, key), "unknown ssh plugin parameter: not used")
    job_keys = _truthy(params.get("jobssh"))
    if job_keys and ungang:
        message = "off, as OpenPAI turns it off without gang allocation (extras.gangAllocation)"
        warns.add(join(where_params, "jobssh"), message)
        job_keys = False
    keys = _user_keys(errs, warns, join(where_params, "userssh"), params.get("userssh"))
    if not job_keys and not keys:
        return None
    if params.get("sshbarriertaskroles") is not None:
        warns.add(join(where_params, "sshbarriertaskroles"),
                  "the barrier waits for every task that runs sshd")  # fmt: skip
    roles = entry.get("taskroles")
    return {
        "jobKeys": job_keys,
        "authorizedKeys": list(keys),
        "taskRoles": roles if isinstance(roles, list) else [],
        "barrier": job_keys and _truthy(params.get("sshbarrier")),
        "barrierTimeout": _barrier_s(errs, where_params, params),
        "failurePolicy": "ignore" if entry.get("failurePolicy") == "ignore" else "fail",
    }


def plugin_fields(
    errs: Errors, warns: Warnings, doc: dict[Any, Any], paths: dict[str, str]
) -> dict[str, Any]:
    """Our `ssh` from the job's first ssh plugin; records which OpenPAI path it came from in
    `paths` (ours → OpenPAI's)."""
    extras = doc.get("extras")
    plugins = extras.get(PLUGINS_PATH.split(".", 1)[1]) if isinstance(extras, dict) else None
    if not isinstance(plugins, list):
        return {}
    ungang = isinstance(extras, dict) and extras.get("gangAllocation") is False
    out: dict[str, Any] = {}
    for i, entry in enumerate(plugins):
        where = item(PLUGINS_PATH, i)
        if not isinstance(entry, dict) or entry.get("plugin") != SSH_PLUGIN:
            continue
        if "ssh" in out:
            warns.add(join(where, "plugin"), "a second ssh plugin: only the first is used")
        elif (ssh := _ssh(errs, warns, where, entry, ungang)) is not None:
            out["ssh"] = ssh
            paths["ssh.taskRoles"] = join(where, "taskroles")
            paths["ssh"] = where
    out.update(_tensorboard(doc, plugins, paths))
    return out


def _tensorboard(
    doc: dict[Any, Any], plugins: list[Any], paths: dict[str, str]
) -> dict[str, Any]:
    """Our `services: {tensorboard: ...}` from the first tensorboard plugin (its parameters
    are checked, and warned about, by openpai_hooks.check_plugins)."""
    at = next((i for i, e in enumerate(plugins) if isinstance(e, dict)
               and e.get("plugin") == TENSORBOARD_PLUGIN), None)  # fmt: skip
    if at is None:
        return {}
    board = read_board(Errors(), Warnings(), item(PLUGINS_PATH, at), plugins[at])
    roles = doc.get("taskRoles")
    if board is None or not isinstance(roles, dict):
        return {}
    paths[f"services.{SERVICE}"] = item(PLUGINS_PATH, at)
    return service_fields(board, [str(r) for r in roles])
