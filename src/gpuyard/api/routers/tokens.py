"""Token endpoints: a user's API tokens, made by a platform admin or by the user themselves.

The token itself is in the answer to POST only; the server keeps its SHA-256 hash.
"""

from __future__ import annotations

from fastapi import APIRouter

from gpuyard.api.auth import CallerDep
from gpuyard.api.authz import authorize_self_or_admin
from gpuyard.api.deps import ControllerDep
from gpuyard.api.schemas import error_responses
from gpuyard.api.schemas.users import TokenCreated, TokenIn, TokenList, TokenOut, token_out
from gpuyard.api.services import tokens as svc

router = APIRouter(
    prefix="/api/v1/users/{user}/tokens",
    tags=["tokens"],
    responses=error_responses(401, 403, 404, 422),
)


@router.post("", status_code=201, response_model=TokenCreated)
def create_token(
    user: str, ctl: ControllerDep, caller: CallerDep, body: TokenIn | None = None
) -> TokenCreated:
    """Make a token for `user`; the answer holds the token, shown this once."""
    authorize_self_or_admin(caller, user, "make tokens")
    made = svc.create(ctl, user, body or TokenIn())
    return TokenCreated(**token_out(made.record).model_dump(), token=made.secret)


@router.get("", response_model=TokenList)
def list_tokens(user: str, ctl: ControllerDep, caller: CallerDep) -> TokenList:
    authorize_self_or_admin(caller, user, "list the tokens")
    return TokenList(tokens=[token_out(t) for t in svc.list_tokens(ctl, user)])


@router.delete("/{token_id}", response_model=TokenOut)
def revoke_token(user: str, token_id: str, ctl: ControllerDep, caller: CallerDep) -> TokenOut:
    authorize_self_or_admin(caller, user, "revoke tokens")
    return token_out(svc.revoke(ctl, user, token_id))
