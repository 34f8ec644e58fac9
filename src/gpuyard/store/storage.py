"""Tenants' named storage (`tenant_storage`): per tenant, name → host path, mount point,
read-only or not, set by a platform admin (`gpuyard admin storage set`); what a job's
`storage` (OpenPAI's teamwise_storage) mounts by name (model/storage.py).

Every read is keyed by the tenant: a name resolves only within its own tenant. A tenant's
removal removes its storage (foreign key, ON DELETE CASCADE).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from gpuyard.model import Clock
from gpuyard.model.storage import StorageMount
from gpuyard.store.tables import TenantStorageRow


@dataclass(frozen=True, slots=True)
class StorageEntry:
    """A tenant's named storage, as an admin sees it."""

    tenant: str
    mount: StorageMount
    updated_at: float
    updated_by: str | None


class StorageRepo:
    def __init__(self, sessions: sessionmaker[Session], clock: Clock) -> None:
        self._sessions = sessions
        self._clock = clock

    def set(self, tenant: str, mount: StorageMount, by: str | None) -> StorageEntry:
        """Set (or replace) `tenant`'s storage named `mount.name`."""
        with self._sessions.begin() as s:
            row = s.get(TenantStorageRow, (tenant, mount.name))
            if row is None:
                row = TenantStorageRow(tenant=tenant, name=mount.name)
                s.add(row)
            row.path, row.mount_point = mount.path, mount.mount_point
            row.read_only = mount.read_only
            row.updated_at, row.updated_by = self._clock.now(), by
            return _entry(row)

    def remove(self, tenant: str, name: str) -> bool:
        """Drop `tenant`'s storage `name`; False if it had none."""
        with self._sessions.begin() as s:
            done = s.execute(
                delete(TenantStorageRow).where(
                    TenantStorageRow.tenant == tenant, TenantStorageRow.name == name
                )
            )
            return bool(getattr(done, "rowcount", 0))

    def entries(self, tenant: str) -> list[StorageEntry]:
        """`tenant`'s named storage, by name."""
        query = (
            select(TenantStorageRow)
            .where(TenantStorageRow.tenant == tenant)
            .order_by(TenantStorageRow.name)
        )
        with self._sessions() as s:
            return [_entry(row) for row in s.scalars(query)]

    def mounts(self, tenant: str) -> dict[str, StorageMount]:
        """`tenant`'s named storage by name: what its jobs' names resolve to."""
        return {e.mount.name: e.mount for e in self.entries(tenant)}


def _entry(row: TenantStorageRow) -> StorageEntry:
    mount = StorageMount(row.name, row.path, row.mount_point, bool(row.read_only))
    return StorageEntry(row.tenant, mount, row.updated_at, row.updated_by)
