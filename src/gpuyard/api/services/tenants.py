"""What the tenant endpoints do: create, update, read tenants, and manage their members.

A tenant body is the `gpuyard.model.Tenant` dataclass in camelCase JSON; it is read
generically, so a field added to `Tenant` is accepted here without a change. Beyond the
types, `tenant_errors` checks what a type cannot say (no negative quota, a positive weight,
absolute storage roots).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from typing import Any

from pydantic import TypeAdapter, ValidationError

from gpuyard.api.errors import InvalidInput, invalid_from
from gpuyard.api.schemas import camel, snake_keys
from gpuyard.api.services.storage_roots import prepare_roots, root_errors
from gpuyard.controller import Controller
from gpuyard.model import Tenant
from gpuyard.spec.limits import PRIORITY
from gpuyard.store import (
    Membership,
    TenantRecord,
    TenantRole,
    UserNotFound,
    UserRecord,
    tenant_doc,
)

STRICT = TypeAdapter(Tenant)
MAX_NUMBER = 2**32  # GPUs, MB, seconds, a uid: none of them larger
UID_ASSIGNED = "assigned by the platform when the tenant is created; it cannot be set"
MIN_INTERACTIVE_IDLE_S = 60  # above the sessions' heartbeat (api/services/interactive.py)
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
FIELDS = frozenset(f.name for f in dataclasses.fields(Tenant))


def parse_tenant(doc: dict[str, Any]) -> Tenant:
    """A request body → a checked `Tenant`, or `InvalidInput` naming every bad field."""
    data = snake_keys(doc)
    unknown = sorted(set(data) - FIELDS)
    if unknown:
        known = ", ".join(sorted(camel(f) for f in FIELDS))
        raise InvalidInput(
            f"the tenant has {len(unknown)} unknown field(s)",
            [(camel(k), f"unknown field; known fields: {known}") for k in unknown],
        )
    try:
        tenant = _strict_tenant(data)
    except ValidationError as exc:
        raise invalid_from("tenant", exc) from None
    if errors := tenant_errors(tenant):
        n = len(errors)
        raise InvalidInput(f"the tenant has {n} error{'s' if n != 1 else ''}", errors)
    return dataclasses.replace(tenant, storage_roots=_normalised(tenant.storage_roots))


def _strict_tenant(data: dict[str, Any]) -> Tenant:
    """Typed strictly, as JSON: `true` is no number and `1` no boolean (lax typing read
    `"maxGpusPerUser": false` as 0 GPUs, and `"weight": true` as 1)."""
    return STRICT.validate_json(json.dumps(data), strict=True)


def tenant_errors(t: Tenant) -> list[tuple[str, str]]:
    errors = []
    if not NAME_RE.fullmatch(t.name):
        errors.append(
            ("name", "1 to 63 letters, digits, '_', '.' or '-', starting with a letter or digit")
        )
    errors += _negative_numbers("", tenant_doc(t))
    if t.weight <= 0:
        errors.append(("weight", "must be more than 0"))
    if t.idle_gpu_threshold_pct > 100:
        errors.append(("idleGpuThresholdPct", "must be a percentage from 0 to 100"))
    if t.idle_gpu_window_s < 60:
        errors.append(("idleGpuWindowS", "must be at least 60 (seconds)"))
    if t.interactive_idle_timeout_s < MIN_INTERACTIVE_IDLE_S:
        errors.append(("interactiveIdleTimeoutS", "must be at least 60 (seconds)"))
    if t.log_limit_mb < 1:
        errors.append(("logLimitMB", "must be at least 1 (MiB)"))
    if t.max_priority is not None and t.max_priority > PRIORITY[1]:
        errors.append(("maxPriority", f"must be at most {PRIORITY[1]}, a job's highest priority"))
    flavors = [q.flavor for q in t.quotas]
    for dup in sorted({f for f in flavors if flavors.count(f) > 1}):
        errors.append(("quotas", f"flavor {dup} is given more than once"))
    for i, root in enumerate(t.storage_roots):
        if not root.startswith("/") or ".." in root.split("/"):
            errors.append(
                (f"storageRoots[{i}]", f"must be an absolute path without '..', not {root!r}")
            )
    return errors


def _negative_numbers(prefix: str, data: Any) -> list[tuple[str, str]]:
    """Every number in the tenant (quotas, limits, budgets) must be 0 or more, and at most
    `MAX_NUMBER` (a time the controller adds to now must stay a date)."""
    if isinstance(data, dict):
        return [
            e
            for k, v in data.items()
            for e in _negative_numbers(f"{prefix}.{camel(k)}" if prefix else camel(k), v)
        ]
    if isinstance(data, list):
        return [e for i, v in enumerate(data) for e in _negative_numbers(f"{prefix}[{i}]", v)]
    if isinstance(data, int | float) and not isinstance(data, bool):
        if not math.isfinite(data) or data > MAX_NUMBER:
            return [(prefix, f"must be a finite number at most {MAX_NUMBER}")]
        if data < 0:
            return [(prefix, f"must be 0 or more, not {data}")]
    return []


def _normalised(roots: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(os.path.normpath(r) for r in roots))


def create(ctl: Controller, doc: dict[str, Any]) -> TenantRecord:
    """A new tenant: it gets its own id block (uid) and its missing storage roots, 0700."""
    if doc.get("uid") is not None:
        raise InvalidInput("the tenant's uid is assigned", [("uid", UID_ASSIGNED)])
    tenant = _apart(ctl, parse_tenant(doc))
    record = ctl.store.tenants.create(tenant)
    prepare_roots(record.tenant)
    return record


def update(ctl: Controller, name: str, patch: dict[str, Any]) -> TenantRecord:
    """Change the fields given in `patch` (camelCase); the others keep their values."""
    current = get(ctl, name)
    if "name" in patch and patch["name"] != name:
        raise InvalidInput("a tenant cannot be renamed", [("name", f"must be {name!r}")])
    if "uid" in patch and patch["uid"] != current.tenant.uid:
        raise InvalidInput("the tenant's uid cannot be changed", [("uid", UID_ASSIGNED)])
    merged = {**_camel_doc(current.tenant), **patch, "name": name}
    record = ctl.store.tenants.update(_apart(ctl, parse_tenant(merged)))
    prepare_roots(record.tenant)
    return record


def _apart(ctl: Controller, tenant: Tenant) -> Tenant:
    """`tenant`, if its storage roots keep apart from system dirs and other tenants' roots."""
    if errors := root_errors(tenant, ctl.store.tenants.tenants()):
        n = len(errors)
        raise InvalidInput(f"the tenant has {n} error{'s' if n != 1 else ''}", errors)
    return tenant


def _camel_doc(t: Tenant) -> dict[str, Any]:
    return {camel(k): v for k, v in tenant_doc(t).items()}


def get(ctl: Controller, name: str) -> TenantRecord:
    record = ctl.store.tenants.get(name)
    if record is None:
        raise LookupError(f"no tenant {name}")
    return record


def readable(ctl: Controller, caller: UserRecord) -> list[TenantRecord]:
    """The tenants `caller` may read: all for a platform admin, else their own."""
    mine = {m.tenant for m in caller.memberships}
    return [r for r in ctl.store.tenants.list() if caller.is_admin or r.name in mine]


def members(ctl: Controller, tenant: str) -> list[tuple[str, TenantRole]]:
    get(ctl, tenant)
    return ctl.store.users.members(tenant)


def set_member(ctl: Controller, tenant: str, user: str, role: TenantRole) -> None:
    get(ctl, tenant)
    try:
        ctl.store.users.set_membership(user, Membership(tenant, role))
    except UserNotFound:
        raise LookupError(f"no user {user}; a platform admin creates users") from None


def remove_member(ctl: Controller, tenant: str, user: str) -> None:
    if not ctl.store.users.remove_membership(user, tenant):
        raise LookupError(f"user {user} is not a member of tenant {tenant}")
