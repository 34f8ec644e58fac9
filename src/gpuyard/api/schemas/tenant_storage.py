"""Named storage bodies of a tenant: what a platform admin sends (a host path, a mount point,
read-only or not) and what comes back."""

from __future__ import annotations

from pydantic import ConfigDict, Field, StrictBool, StrictStr

from gpuyard.api.schemas.common import Out, camel, iso
from gpuyard.store import StorageEntry


class StorageIn(Out):
    """`path` (required): a host dir under the tenant's storage roots; `mountPoint`: where
    tasks see it, below /mnt (default /mnt/NAME); `readOnly` (default true)."""

    model_config = ConfigDict(alias_generator=camel, populate_by_name=True, extra="forbid")

    path: StrictStr = Field(min_length=1, max_length=4096)
    mount_point: StrictStr | None = Field(None, min_length=1, max_length=1024)
    read_only: StrictBool = True


class StorageOut(Out):
    name: str
    path: str
    mount_point: str
    read_only: bool
    updated_at: str | None
    updated_by: str | None


class StorageList(Out):
    storage: list[StorageOut]


def storage_out(e: StorageEntry) -> StorageOut:
    m = e.mount
    return StorageOut(name=m.name, path=m.path, mount_point=m.mount_point, read_only=m.read_only,
                      updated_at=iso(e.updated_at), updated_by=e.updated_by)
