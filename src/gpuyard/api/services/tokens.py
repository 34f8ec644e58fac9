"""What the token endpoints do: make (shown once), list and revoke a user's API tokens."""

from __future__ import annotations

from gpuyard.api.schemas.users import TokenIn
from gpuyard.controller import Controller
from gpuyard.store import NewToken, TokenRecord

DAY_S = 86400.0


def create(ctl: Controller, user: str, body: TokenIn) -> NewToken:
    expires = None
    if body.expires_in_days is not None:
        expires = ctl.clock.now() + body.expires_in_days * DAY_S
    return ctl.store.tokens.create(user, body.name, expires)


def list_tokens(ctl: Controller, user: str) -> list[TokenRecord]:
    if ctl.store.users.get(user) is None:
        raise LookupError(f"no user {user}")
    return ctl.store.tokens.list(user)


def revoke(ctl: Controller, user: str, token_id: str) -> TokenRecord:
    return ctl.store.tokens.revoke(user, token_id)
