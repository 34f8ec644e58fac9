"""User, membership and token bodies. A token's secret appears once, in `TokenCreated`."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StrictBool

from gpuyard.api.schemas.common import NotBool, Out, iso
from gpuyard.store import PlatformRole, TenantRole, TokenRecord, UserRecord

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"
MAX_TOKEN_DAYS = 3650


class MembershipIO(Out):
    tenant: str = Field(pattern=NAME_PATTERN)
    role: TenantRole = TenantRole.MEMBER


class UserIn(Out):
    name: str = Field(pattern=NAME_PATTERN)
    admin: StrictBool = False  # `"admin": "false"` or `1` is a 422, not a guess
    memberships: list[MembershipIO] = Field(default_factory=list, max_length=1000)


class UserOut(Out):
    name: str
    role: PlatformRole
    admin: bool
    memberships: list[MembershipIO]
    created_at: str | None


class UserList(Out):
    users: list[UserOut]


class TokenIn(Out):
    name: str = Field(default="cli", pattern=NAME_PATTERN)
    expires_in_days: Annotated[float | None, NotBool] = Field(default=None, gt=0, le=MAX_TOKEN_DAYS)


class TokenOut(Out):
    id: str
    user: str
    name: str
    created_at: str | None
    last_used_at: str | None
    expires_at: str | None
    revoked_at: str | None


class TokenCreated(TokenOut):
    token: str  # the only time the token is ever shown


class TokenList(Out):
    tokens: list[TokenOut]


def user_out(u: UserRecord) -> UserOut:
    return UserOut(
        name=u.name,
        role=u.role,
        admin=u.is_admin,
        memberships=[MembershipIO(tenant=m.tenant, role=m.role) for m in u.memberships],
        created_at=iso(u.created_at),
    )


def token_out(t: TokenRecord) -> TokenOut:
    return TokenOut(
        id=t.id,
        user=t.user,
        name=t.name,
        created_at=iso(t.created_at),
        last_used_at=iso(t.last_used_at),
        expires_at=iso(t.expires_at),
        revoked_at=iso(t.revoked_at),
    )
