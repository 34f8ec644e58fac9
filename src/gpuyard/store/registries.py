"""Tenants' registry credentials: per tenant, a login (username and password or token) for
each registry host, set by a platform admin (`gpuyard admin registry set`).

The password is sealed with the store's secrets key (as a spec's secret values and the SMTP
password) in a table of its own, `registry_credentials`: no job, tenant or user read gives it
back. `entries` lists a tenant's hosts and usernames (what an admin sees); `logins` opens the
passwords, for the controller alone, when it builds a launch. A tenant's removal removes its
credentials (foreign key, ON DELETE CASCADE).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from gpuyard.model import Clock
from gpuyard.model.registries import RegistryLogin
from gpuyard.store.secrets import SEALED, SECRET, SecretBox
from gpuyard.store.tables import RegistryCredentialRow


@dataclass(frozen=True, slots=True)
class RegistryEntry:
    """A tenant's credential as it may be shown: never its password."""

    tenant: str
    registry: str
    username: str
    updated_at: float
    updated_by: str | None


class RegistryRepo:
    def __init__(self, sessions: sessionmaker[Session], clock: Clock, secrets: SecretBox) -> None:
        self._sessions = sessions
        self._clock = clock
        self._secrets = secrets

    def set(self, tenant: str, login: RegistryLogin, by: str | None) -> RegistryEntry:
        """Set (or replace) `tenant`'s login for `login.registry`."""
        sealed = self._secrets.seal({SECRET: login.password})[SEALED]
        with self._sessions.begin() as s:
            row = s.get(RegistryCredentialRow, (tenant, login.registry))
            if row is None:
                row = RegistryCredentialRow(tenant=tenant, registry_host=login.registry)
                s.add(row)
            row.username, row.password_sealed = login.username, sealed
            row.updated_at, row.updated_by = self._clock.now(), by
            return _entry(row)

    def remove(self, tenant: str, registry: str) -> bool:
        """Drop `tenant`'s login for `registry`; False if it had none."""
        with self._sessions.begin() as s:
            done = s.execute(
                delete(RegistryCredentialRow).where(
                    RegistryCredentialRow.tenant == tenant,
                    RegistryCredentialRow.registry_host == registry,
                )
            )
            return bool(getattr(done, "rowcount", 0))

    def entries(self, tenant: str) -> list[RegistryEntry]:
        """`tenant`'s credentials, by registry, without their passwords."""
        return [_entry(row) for row in self._rows(tenant)]

    def logins(self, tenant: str) -> tuple[RegistryLogin, ...]:
        """`tenant`'s logins, passwords open: for a task's launch only, never an answer."""
        return tuple(
            RegistryLogin(row.registry_host, row.username,
                          self._secrets.unseal({SEALED: row.password_sealed})[SECRET])
            for row in self._rows(tenant)
        )

    def _rows(self, tenant: str) -> list[RegistryCredentialRow]:
        query = (
            select(RegistryCredentialRow)
            .where(RegistryCredentialRow.tenant == tenant)
            .order_by(RegistryCredentialRow.registry_host)
        )
        with self._sessions() as s:
            return list(s.scalars(query))


def _entry(row: RegistryCredentialRow) -> RegistryEntry:
    return RegistryEntry(
        row.tenant, row.registry_host, row.username, row.updated_at, row.updated_by
    )
