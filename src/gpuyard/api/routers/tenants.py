"""Tenant endpoints: platform admins create and update tenants; members read their own;
tenant admins manage their tenant's members."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Response

from gpuyard.api.auth import CallerDep
from gpuyard.api.authz import (
    authorize_platform_admin,
    authorize_tenant_admin,
    authorize_tenant_read,
)
from gpuyard.api.deps import ControllerDep
from gpuyard.api.schemas import error_responses
from gpuyard.api.schemas.tenants import MemberIn, MemberList, MemberOut, tenant_list, tenant_out
from gpuyard.api.services import tenants as svc

router = APIRouter(
    prefix="/api/v1/tenants",
    tags=["tenants"],
    responses=error_responses(401, 403, 404, 409, 422),
)

TenantBody = Annotated[
    dict[str, Any],
    Body(
        examples=[
            {
                "name": "vision",
                "quotas": [{"flavor": "A100-80GB", "guaranteed": 8, "borrowingLimit": 8}],
                "weight": 1.0,
                "queuePolicy": "las",
                "storageRoots": ["/mnt/nfs/vision"],
            }
        ]
    ),
]


@router.post("", status_code=201)
def create_tenant(
    body: TenantBody, response: Response, ctl: ControllerDep, caller: CallerDep
) -> dict[str, Any]:
    """Create a tenant (platform admin): a `Tenant` in camelCase; only `name` is required."""
    authorize_platform_admin(caller, "create tenants")
    record = svc.create(ctl, body)
    response.headers["Location"] = f"/api/v1/tenants/{record.name}"
    return tenant_out(record)


@router.get("")
def list_tenants(ctl: ControllerDep, caller: CallerDep) -> dict[str, Any]:
    """The tenants the caller belongs to (all of them for a platform admin)."""
    return tenant_list(svc.readable(ctl, caller))


@router.get("/{name}")
def get_tenant(name: str, ctl: ControllerDep, caller: CallerDep) -> dict[str, Any]:
    authorize_tenant_read(caller, name)
    return tenant_out(svc.get(ctl, name))


@router.patch("/{name}")
def update_tenant(
    name: str, body: TenantBody, ctl: ControllerDep, caller: CallerDep
) -> dict[str, Any]:
    """Change the given fields of a tenant (platform admin); lists are replaced whole."""
    authorize_platform_admin(caller, "update tenants")
    return tenant_out(svc.update(ctl, name, body))


@router.get("/{name}/members", response_model=MemberList)
def list_members(name: str, ctl: ControllerDep, caller: CallerDep) -> MemberList:
    authorize_tenant_read(caller, name)
    return MemberList(members=[MemberOut(user=u, role=r) for u, r in svc.members(ctl, name)])


@router.put("/{name}/members/{user}", status_code=204)
def set_member(name: str, user: str, body: MemberIn, ctl: ControllerDep, caller: CallerDep) -> None:
    """Add a user to the tenant or change their role (tenant admin or platform admin)."""
    authorize_tenant_admin(caller, name)
    svc.set_member(ctl, name, user, body.role)


@router.delete("/{name}/members/{user}", status_code=204)
def remove_member(name: str, user: str, ctl: ControllerDep, caller: CallerDep) -> None:
    authorize_tenant_admin(caller, name)
    svc.remove_member(ctl, name, user)
