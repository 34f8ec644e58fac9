"""OpenPAI's `extras`: what gpuyard honours, what it warns about, what it refuses.

- `com.microsoft.pai.runtimeplugin`: `cmd` honoured (openpai_hooks.py); others a warning.
- `hivedScheduler.taskRoles.R.gpuType` / `.skuType`: the role's GPU type (a HiveD SKU name is
  matched like our `gpuType`: `A100` matches `A100-80GB`); a role that is not in `taskRoles`,
  a bad name, or both `gpuType` and `reservationId` are refused, as OpenPAI refuses them.
  `reservationId` and `affinityGroupName` are accepted with a warning: there are no
  reservations or affinity groups here yet.
- `hivedScheduler.jobPriorityClass`: our `priorityClass` (`PRIORITY_CLASSES`: prod → prod,
  test → normal, oppo → opportunistic; crit → prod with a warning); another name is
  refused, as OpenPAI refuses it.
- `gangAllocation`: our `gang` (openpai.py): false, the job's tasks start as they fit.
- `submitFrom`: where the job was submitted from (the portal, an SDK): no effect, as on OpenPAI.
- anything else: a warning (accepted, not used).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuyard.model import PriorityClass
from gpuyard.spec import limits
from gpuyard.spec.errors import Errors, got, join
from gpuyard.spec.notices import Warnings
from gpuyard.spec.openpai_hooks import PLUGINS_KEY, check_plugins

HIVED = "hivedScheduler"
HIVED_PATH = f"extras.{HIVED}"
INFO_ONLY = ("submitFrom",)
GPU_TYPE_KEYS = ("skuType", "gpuType")
HIVED_ROLE_WARNINGS = {
    "reservationId": "reservations are not supported yet: the role may land on any node",
    "affinityGroupName": "affinity groups are not supported yet (the job's tasks still start "
    "together, as one gang)",
}
PRIORITY_CLASS_PATH = f"{HIVED_PATH}.jobPriorityClass"
# HiveD's classes → ours (docs/openpai.md): crit, above prod there, is prod here
PRIORITY_CLASSES = {
    "crit": PriorityClass.PROD,
    "prod": PriorityClass.PROD,
    "test": PriorityClass.NORMAL,
    "oppo": PriorityClass.OPPORTUNISTIC,
}


@dataclass
class Extras:
    """What the rest of the conversion needs from `extras`."""

    plugins: list[tuple[int, dict]] = field(default_factory=list)  # the cmd plugins
    gpu_types: dict[str, tuple[object, str]] = field(default_factory=dict)  # role → value, path
    priority_class: PriorityClass | None = None  # jobPriorityClass, mapped


def _gpu_type(errs: Errors, path: str, body: dict[Any, Any]) -> tuple[object, str] | None:
    given = [(key, body[key]) for key in GPU_TYPE_KEYS if body.get(key) is not None]
    for key, value in given:
        if not isinstance(value, str) or not limits.GPU_TYPE_RE.fullmatch(value):
            errs.add(join(path, key), f"must be {limits.GPU_TYPE_RULE}{got(value)}")
            return None
    if len({value for _, value in given}) > 1:
        errs.add(join(path, "gpuType"), "must be the same as skuType when both are given")
        return None
    if given and body.get("reservationId") is not None:
        errs.add(join(path, given[0][0]), "cannot be given with reservationId: only one allowed")
        return None
    return (given[0][1], join(path, given[0][0])) if given else None


def _hived_role(errs: Errors, warns: Warnings, path: str, body: object, out: Extras) -> None:
    if not isinstance(body, dict):
        errs.add(path, f"must be a mapping with skuType or gpuType{got(body)}")
        return
    for key in body:
        if key in HIVED_ROLE_WARNINGS and body[key] is not None:
            warns.add(join(path, key), HIVED_ROLE_WARNINGS[key])
        elif key not in GPU_TYPE_KEYS and key not in HIVED_ROLE_WARNINGS:
            warns.add(join(path, key), "unknown HiveD field: not used")
    if (found := _gpu_type(errs, path, body)) is not None:
        out.gpu_types[path.rsplit(".", 1)[1]] = found


def _hived(errs: Errors, warns: Warnings, value: object, roles: object, out: Extras) -> None:
    if not isinstance(value, dict):
        errs.add(HIVED_PATH, f"must be a mapping with taskRoles and jobPriorityClass{got(value)}")
        return
    for key in value:
        if key == "jobPriorityClass":
            out.priority_class = _priority_class(errs, warns, value[key])
        elif key != "taskRoles":
            warns.add(join(HIVED_PATH, key), "unknown HiveD field: not used")
    per_role = value.get("taskRoles") or {}
    if not isinstance(per_role, dict):
        errs.add(join(HIVED_PATH, "taskRoles"), f"must be a mapping of role names{got(per_role)}")
        return
    for name, body in per_role.items():
        path = join(join(HIVED_PATH, "taskRoles"), name)
        if not isinstance(roles, dict) or name not in roles:
            errs.add(path, f"there is no task role {name!r} in taskRoles")
        else:
            _hived_role(errs, warns, path, body, out)


def _priority_class(errs: Errors, warns: Warnings, value: object) -> PriorityClass | None:
    if value is None:
        return None
    if not isinstance(value, str) or value not in PRIORITY_CLASSES:
        errs.add(PRIORITY_CLASS_PATH, f"must be one of prod, test, oppo (or crit){got(value)}")
        return None
    if value == "crit":
        warns.add(PRIORITY_CLASS_PATH, "crit runs as prod here: there is no class above prod")
    return PRIORITY_CLASSES[value]


def read_extras(errs: Errors, warns: Warnings, doc: dict[Any, Any]) -> Extras:
    """Check `extras` and gather what the conversion uses; warnings for the rest."""
    out = Extras()
    value = doc.get("extras")
    if value is None:
        return out
    if not isinstance(value, dict):
        errs.add("extras", f"must be a mapping{got(value)}")
        return out
    for key, body in value.items():
        path = join("extras", key)
        if key == PLUGINS_KEY:
            out.plugins = check_plugins(errs, warns, body)
        elif key == HIVED:
            _hived(errs, warns, body, doc.get("taskRoles"), out)
        elif key == "gangAllocation":
            pass  # our `gang` (openpai.py reads it)
        elif key not in INFO_ONLY:
            warns.add(path, "unknown extras field: not used")
    return out
