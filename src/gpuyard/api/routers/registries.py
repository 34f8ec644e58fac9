"""Registry credentials of a tenant (platform admins): `PUT`, `GET`, `DELETE` under
`/api/v1/tenants/{name}/registries`. No answer ever holds a password or token."""

from __future__ import annotations

from fastapi import APIRouter

from gpuyard.api.auth import CallerDep
from gpuyard.api.authz import authorize_platform_admin
from gpuyard.api.deps import ControllerDep
from gpuyard.api.schemas import error_responses
from gpuyard.api.schemas.registries import RegistryIn, RegistryList, RegistryOut, registry_out
from gpuyard.api.services import registries as svc

router = APIRouter(
    prefix="/api/v1/tenants/{name}/registries",
    tags=["tenants"],
    responses=error_responses(401, 403, 404, 422),
)


@router.get("", response_model=RegistryList, response_model_by_alias=True)
def list_registries(name: str, ctl: ControllerDep, caller: CallerDep) -> RegistryList:
    """The registries the tenant's tasks log in to, with each username (no secret)."""
    authorize_platform_admin(caller, "read registry credentials")
    return RegistryList(registries=[registry_out(e) for e in svc.entries(ctl, name)])


@router.put("/{registry}", response_model=RegistryOut, response_model_by_alias=True)
def set_registry(name: str, registry: str, body: RegistryIn, ctl: ControllerDep,
                 caller: CallerDep) -> RegistryOut:
    """Set the tenant's login for a registry host (`registry.lan:5000`, `docker.io`): a
    username and password, or a token. Its tasks pull their images with it, unless their job
    brings its own (OpenPAI `auth`)."""
    authorize_platform_admin(caller, "set registry credentials")
    return registry_out(svc.set_login(ctl, name, registry, body, caller.name))


@router.delete("/{registry}", status_code=204)
def remove_registry(name: str, registry: str, ctl: ControllerDep, caller: CallerDep) -> None:
    authorize_platform_admin(caller, "remove registry credentials")
    svc.remove(ctl, name, registry)
