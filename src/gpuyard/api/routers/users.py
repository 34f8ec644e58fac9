"""User endpoints: platform admins create and list users; anyone may ask who they are."""

from __future__ import annotations

from fastapi import APIRouter, Response

from gpuyard.api.auth import CallerDep
from gpuyard.api.authz import authorize_platform_admin, authorize_self_or_admin
from gpuyard.api.deps import ControllerDep
from gpuyard.api.schemas import error_responses
from gpuyard.api.schemas.users import UserIn, UserList, UserOut, user_out
from gpuyard.api.services import users as svc

router = APIRouter(
    prefix="/api/v1",
    tags=["users"],
    responses=error_responses(401, 403, 404, 409, 422),
)


@router.get("/whoami", response_model=UserOut)
def whoami(caller: CallerDep) -> UserOut:
    """The caller: name, platform role and tenant memberships."""
    return user_out(caller)


@router.post("/users", status_code=201, response_model=UserOut)
def create_user(body: UserIn, response: Response, ctl: ControllerDep, caller: CallerDep) -> UserOut:
    """Create a user with memberships (platform admin); then make them a token."""
    authorize_platform_admin(caller, "create users")
    user = svc.create(ctl, body)
    response.headers["Location"] = f"/api/v1/users/{user.name}"
    return user_out(user)


@router.get("/users", response_model=UserList)
def list_users(ctl: ControllerDep, caller: CallerDep) -> UserList:
    authorize_platform_admin(caller, "list users")
    return UserList(users=[user_out(u) for u in ctl.store.users.list()])


@router.get("/users/{name}", response_model=UserOut)
def get_user(name: str, ctl: ControllerDep, caller: CallerDep) -> UserOut:
    authorize_self_or_admin(caller, name, "read the record")
    return user_out(svc.get(ctl, name))
