"""Authentication: who is calling, from the `Authorization: Bearer <token>` header.

Every endpoint but `/healthz` and the API docs depends on `current_user`. A missing, unknown,
revoked or expired token answers 401 with `WWW-Authenticate: Bearer` and a sentence saying
how to log in.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from starlette.requests import HTTPConnection

from gpuyard.api.deps import get_controller
from gpuyard.store import UserRecord

LOGIN_HINT = (
    "log in with `gpuyard login --url URL --token-file FILE` (or set GPUYARD_TOKEN), or send "
    "the header `Authorization: Bearer <token>`; the first admin token is in "
    "<data dir>/admin-token on the server"
)


class Unauthenticated(Exception):
    """No usable token (HTTP 401); `error` is the RFC 6750 error code, if any."""

    def __init__(self, reason: str, error: str | None = None) -> None:
        super().__init__(f"{reason}: {LOGIN_HINT}")
        self.error = error

    @property
    def challenge(self) -> str:
        return (
            f'Bearer realm="gpuyard", error="{self.error}"'
            if self.error
            else ('Bearer realm="gpuyard"')
        )


def bearer_token(request: HTTPConnection) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if not header:
        raise Unauthenticated("this endpoint needs an API token")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated(
            "the Authorization header must be `Bearer <token>`", "invalid_request"
        )
    return token.strip()


def current_user(request: Request) -> UserRecord:
    return user_for_token(request, bearer_token(request))


def user_for_token(request: HTTPConnection, secret: str) -> UserRecord:
    """The user whose live token `secret` is: the one check of the API, its WebSockets and
    the portal."""
    store = get_controller(request).store
    token, why = store.tokens.check(secret)
    if token is None:
        raise Unauthenticated(f"the API token is not valid ({why})", "invalid_token")
    user = store.users.get(token.user)
    if user is None:  # deleted between the two reads
        raise Unauthenticated("the token's user no longer exists", "invalid_token")
    return user


CallerDep = Annotated[UserRecord, Depends(current_user)]
