"""Named storage of a tenant (OpenPAI's teamwise_storage): `PUT`, `DELETE` (platform admins)
and `GET` (whoever has a role in the tenant: members need the names) under
`/api/v1/tenants/{name}/storage`."""

from __future__ import annotations

from fastapi import APIRouter

from gpuyard.api.auth import CallerDep
from gpuyard.api.authz import authorize_platform_admin, authorize_tenant_read
from gpuyard.api.deps import ControllerDep
from gpuyard.api.schemas import error_responses
from gpuyard.api.schemas.tenant_storage import StorageIn, StorageList, StorageOut, storage_out
from gpuyard.api.services import tenant_storage as svc

router = APIRouter(
    prefix="/api/v1/tenants/{name}/storage",
    tags=["tenants"],
    responses=error_responses(401, 403, 404, 422),
)


@router.get("", response_model=StorageList, response_model_by_alias=True)
def list_storage(name: str, ctl: ControllerDep, caller: CallerDep) -> StorageList:
    """The tenant's named storage: what a job's `storage` (OpenPAI's teamwise_storage
    `storageConfigNames`) may name, with each host path and mount point."""
    authorize_tenant_read(caller, name)
    return StorageList(storage=[storage_out(e) for e in svc.entries(ctl, name)])


@router.put("/{storage}", response_model=StorageOut, response_model_by_alias=True)
def set_storage(name: str, storage: str, body: StorageIn, ctl: ControllerDep,
                caller: CallerDep) -> StorageOut:
    """Define (or replace) the tenant's storage `storage`: a host dir under the tenant's
    storage roots, mounted at `mountPoint` (below /mnt; default /mnt/NAME), read-only unless
    `readOnly: false`, in the tasks of its jobs that name it."""
    authorize_platform_admin(caller, "set a tenant's storage")
    return storage_out(svc.set_storage(ctl, name, storage, body, caller.name))


@router.delete("/{storage}", status_code=204)
def remove_storage(name: str, storage: str, ctl: ControllerDep, caller: CallerDep) -> None:
    """Remove the tenant's storage `storage`: queued jobs that name it fail at launch
    (InvalidSpec); running tasks keep their mount."""
    authorize_platform_admin(caller, "remove a tenant's storage")
    svc.remove(ctl, name, storage)
