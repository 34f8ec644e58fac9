"""What the user endpoints do: create and read users (with their tenant memberships)."""

from __future__ import annotations

from gpuyard.api.errors import InvalidInput
from gpuyard.api.schemas.users import UserIn
from gpuyard.controller import Controller
from gpuyard.store import Membership, PlatformRole, UserRecord


def create(ctl: Controller, body: UserIn) -> UserRecord:
    missing = [
        (f"memberships[{i}].tenant", f"there is no tenant {m.tenant!r}")
        for i, m in enumerate(body.memberships)
        if not ctl.store.tenants.exists(m.tenant)
    ]
    if missing:
        raise InvalidInput("the user has memberships of unknown tenants", missing)
    role = PlatformRole.ADMIN if body.admin else PlatformRole.USER
    memberships = [Membership(m.tenant, m.role) for m in body.memberships]
    return ctl.store.users.create(body.name, role, memberships)


def get(ctl: Controller, name: str) -> UserRecord:
    user = ctl.store.users.get(name)
    if user is None:
        raise LookupError(f"no user {name}")
    return user
