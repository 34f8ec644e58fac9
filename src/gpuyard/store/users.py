"""Users, their platform role, and their memberships (with a role) in tenants."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session, sessionmaker

from gpuyard.model import Clock
from gpuyard.store.tables import MembershipRow, TenantRow, UserRow


class PlatformRole(enum.StrEnum):
    ADMIN = "admin"  # may do everything
    USER = "user"  # may do what their tenant roles allow


class TenantRole(enum.StrEnum):
    TENANT_ADMIN = "tenant-admin"
    MEMBER = "member"
    VIEWER = "viewer"


class UserExists(ValueError):
    pass


class UserNotFound(LookupError):
    pass


@dataclass(frozen=True, slots=True)
class Membership:
    tenant: str
    role: TenantRole


@dataclass(frozen=True, slots=True)
class UserRecord:
    name: str
    role: PlatformRole
    created_at: float
    memberships: tuple[Membership, ...] = ()

    @property
    def is_admin(self) -> bool:
        return self.role == PlatformRole.ADMIN

    def role_in(self, tenant: str) -> TenantRole | None:
        return next((m.role for m in self.memberships if m.tenant == tenant), None)


class UserRepo:
    def __init__(self, sessions: sessionmaker[Session], clock: Clock) -> None:
        self._sessions = sessions
        self._clock = clock

    def get(self, name: str) -> UserRecord | None:
        with self._sessions() as s:
            row = s.get(UserRow, name)
            return _record(s, row) if row else None

    def list(self) -> list[UserRecord]:
        with self._sessions() as s:
            return [_record(s, r) for r in s.scalars(select(UserRow).order_by(UserRow.name))]

    def count(self) -> int:
        with self._sessions() as s:
            return s.scalar(select(func.count()).select_from(UserRow)) or 0

    def members(self, tenant: str) -> list[tuple[str, TenantRole]]:
        q = select(MembershipRow).where(MembershipRow.tenant == tenant).order_by(MembershipRow.user)
        with self._sessions() as s:
            return [(m.user, TenantRole(m.role)) for m in s.scalars(q)]

    def create(
        self, name: str, role: PlatformRole, memberships: Iterable[Membership] = ()
    ) -> UserRecord:
        """A new user with their memberships, in one transaction (tenants must exist)."""
        with self._sessions.begin() as s:
            if s.get(UserRow, name) is not None:
                raise UserExists(f"user {name} already exists")
            row = UserRow(name=name, role=role, created_at=self._clock.now())
            s.add(row)
            s.flush()
            for m in memberships:
                _set_membership(s, name, m)
            return _record(s, row)

    def set_role(self, user: str, role: PlatformRole) -> UserRecord:
        with self._sessions.begin() as s:
            row = s.get(UserRow, user)
            if row is None:
                raise UserNotFound(f"no user {user}")
            row.role = role
            return _record(s, row)

    def set_membership(self, user: str, membership: Membership) -> UserRecord:
        with self._sessions.begin() as s:
            row = s.get(UserRow, user)
            if row is None:
                raise UserNotFound(f"no user {user}")
            _set_membership(s, user, membership)
            return _record(s, row)

    def remove_membership(self, user: str, tenant: str) -> bool:
        with self._sessions.begin() as s:
            q = delete(MembershipRow).where(
                MembershipRow.user == user, MembershipRow.tenant == tenant
            )
            return bool(s.execute(q).rowcount)  # type: ignore[attr-defined]


def _set_membership(s: Session, user: str, m: Membership) -> None:
    if s.get(TenantRow, m.tenant) is None:
        raise LookupError(f"no tenant {m.tenant}")
    row = s.get(MembershipRow, (user, m.tenant)) or MembershipRow(user=user, tenant=m.tenant)
    row.role = m.role
    s.add(row)


def _record(s: Session, row: UserRow) -> UserRecord:
    q = select(MembershipRow).where(MembershipRow.user == row.name).order_by(MembershipRow.tenant)
    ms = tuple(Membership(m.tenant, TenantRole(m.role)) for m in s.scalars(q))
    return UserRecord(row.name, PlatformRole(row.role), row.created_at, ms)
