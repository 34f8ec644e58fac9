"""OpenPAI `deployments` and `defaults.deployment`: the pre/post commands of each role.

`deployments: [{name, taskRoles: {R: {preCommands: [...], postCommands: [...]}}}]`; the one
that `defaults.deployment` names is active: its role's preCommands go before the role's
commands and its postCommands after them, in one ` && ` chain (openpai_script.py). As on
OpenPAI, names must be unique, `defaults.deployment` must name one, and a role's entry holds
only `preCommands` / `postCommands` (lists of strings). A deployment's role that is not in
`taskRoles` is accepted with a warning (it runs nowhere).
"""

from __future__ import annotations

from typing import Any

from gpuyard.spec.errors import Errors, got, item, join, unknown_field
from gpuyard.spec.notices import Warnings

COMMAND_KEYS = ("preCommands", "postCommands")
DEPLOYMENT_KEYS = ("name", "taskRoles", "protocolVersion", "version", "contributor", "description")

Active = dict[str, tuple[str, dict[str, Any]]]  # role → (its path, {preCommands, postCommands})
PROTOCOL_VERSIONS = (2, "2")


def check_version(errs: Errors, path: str, entry: dict[Any, Any]) -> None:
    """A `protocolVersion` inside the document (a role's, a prerequisite's, a deployment's)
    must be 2 too, if given."""
    version = entry.get("protocolVersion")
    if version is not None and (
        not isinstance(version, int | str) or version not in PROTOCOL_VERSIONS
    ):
        errs.add(join(path, "protocolVersion"), f"must be 2, like the document's{got(version)}")


def _check_role(errs: Errors, path: str, body: object) -> bool:
    if not isinstance(body, dict):
        errs.add(path, f"must be a mapping with preCommands and postCommands{got(body)}")
        return False
    ok = True
    for key, value in body.items():
        where = join(path, key)
        if key not in COMMAND_KEYS:
            errs.add(where, unknown_field(key, COMMAND_KEYS))
            ok = False
        elif not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            errs.add(where, f"must be a list of command strings{got(value)}")
            ok = False
    return ok


def _check_one(errs: Errors, warns: Warnings, i: int, entry: object, roles: object) -> Active:
    """One deployment's roles, checked; {} after an error."""
    where = item("deployments", i)
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        errs.add(where, f"must be a mapping with name and taskRoles{got(entry)}")
        return {}
    check_version(errs, where, entry)
    for key in entry:
        if key not in DEPLOYMENT_KEYS:
            errs.add(join(where, key), unknown_field(key, DEPLOYMENT_KEYS))
    per_role = entry.get("taskRoles")
    if not isinstance(per_role, dict):
        errs.add(join(where, "taskRoles"), f"must be a mapping of role names{got(per_role)}")
        return {}
    out: Active = {}
    for name, body in per_role.items():
        path = join(join(where, "taskRoles"), name)
        if _check_role(errs, path, body):
            out[str(name)] = (path, body)  # type: ignore[assignment]
        if not isinstance(roles, dict) or name not in roles:
            warns.add(path, f"there is no task role {name!r}: these commands run nowhere")
    return out


def active_deployment(errs: Errors, warns: Warnings, doc: dict[Any, Any]) -> Active:
    """The roles of the deployment `defaults.deployment` names ({} if none is named)."""
    value = doc.get("deployments")
    if value is not None and not isinstance(value, list):
        errs.add("deployments", f"must be a list of {{name, taskRoles}} items{got(value)}")
        value = None
    by_name: dict[str, Active] = {}
    for i, entry in enumerate(value or []):
        roles = _check_one(errs, warns, i, entry, doc.get("taskRoles"))
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            if entry["name"] in by_name:
                errs.add(join(item("deployments", i), "name"), "another deployment has this name")
            by_name.setdefault(entry["name"], roles)
    defaults = doc.get("defaults")
    chosen = defaults.get("deployment") if isinstance(defaults, dict) else None
    if chosen is None:
        return {}
    if not isinstance(chosen, str) or chosen not in by_name:
        known = ", ".join(by_name) or "none defined"
        errs.add("defaults.deployment", f"must name a deployment ({known}){got(chosen)}")
        return {}
    return by_name[chosen]
