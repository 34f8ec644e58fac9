"""Small builders for spec tests: a valid document in our format, changed in one line."""

from __future__ import annotations

import copy
from typing import Any

BASE: dict[str, Any] = {
    "name": "mnist-train",
    "taskRoles": {"worker": {"command": "python train.py"}},
}


def doc(**fields: Any) -> dict[str, Any]:
    """A valid minimal job document with top-level `fields` set (None values removed)."""
    out = copy.deepcopy(BASE)
    out.update(fields)
    return {k: v for k, v in out.items() if v is not None}


def role_doc(**fields: Any) -> dict[str, Any]:
    """A valid minimal job whose one role `worker` has `fields` set."""
    role = {"command": "python train.py", **fields}
    return doc(taskRoles={"worker": {k: v for k, v in role.items() if v is not None}})
