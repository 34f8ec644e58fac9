"""Tenants: each one's settings (a `gpuyard.model.Tenant`) stored as one JSON document.

The document is written and read generically from the `Tenant` dataclass (pydantic's
`TypeAdapter`), so a field added to `Tenant` with a default is stored and read back without
a change here; a stored document missing a newer field gets that field's default.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from gpuyard.model import Clock, Tenant, tenant_uid
from gpuyard.store.tables import TenantRow

TENANT = TypeAdapter(Tenant)
TENANT_FIELDS = frozenset(f.name for f in dataclasses.fields(Tenant))


class TenantExists(ValueError):
    pass


class TenantNotFound(LookupError):
    pass


@dataclass(frozen=True, slots=True)
class TenantRecord:
    tenant: Tenant
    created_at: float
    updated_at: float

    @property
    def name(self) -> str:
        return self.tenant.name


def tenant_doc(t: Tenant) -> dict[str, Any]:
    """The tenant as plain JSON data, snake_case keys (enums as values, tuples as lists)."""
    return TENANT.dump_python(t, mode="json")


def tenant_of(doc: dict[str, Any]) -> Tenant:
    """A `Tenant` from `tenant_doc` data; unknown keys are ignored, missing ones default.

    Raises `pydantic.ValidationError` naming each bad field.
    """
    return TENANT.validate_python({k: v for k, v in doc.items() if k in TENANT_FIELDS})


class TenantRepo:
    def __init__(self, sessions: sessionmaker[Session], clock: Clock) -> None:
        self._sessions = sessions
        self._clock = clock

    def get(self, name: str) -> TenantRecord | None:
        with self._sessions() as s:
            row = s.get(TenantRow, name)
            return _record(row) if row else None

    def list(self) -> list[TenantRecord]:
        with self._sessions() as s:
            return [_record(r) for r in s.scalars(select(TenantRow).order_by(TenantRow.name))]

    def tenants(self) -> list[Tenant]:
        """Every tenant's settings: what the controller hands the scheduler."""
        return [r.tenant for r in self.list()]

    def exists(self, name: str) -> bool:
        with self._sessions() as s:
            return s.get(TenantRow, name) is not None

    def create(self, tenant: Tenant) -> TenantRecord:
        """Store a new tenant; it gets the next free id block (its `uid`) unless it has one."""
        now = self._clock.now()
        with self._sessions.begin() as s:
            if s.get(TenantRow, tenant.name) is not None:
                raise TenantExists(f"tenant {tenant.name} already exists")
            if tenant.uid is None:
                tenant = dataclasses.replace(tenant, uid=_next_uid(s))
            row = TenantRow(
                name=tenant.name, settings=_settings(tenant), created_at=now, updated_at=now
            )
            s.add(row)
            return _record(row)

    def assign_missing_uids(self) -> list[str]:
        """Give an id block to each tenant stored before tenants had one; their names."""
        with self._sessions.begin() as s:
            done = []
            order = (TenantRow.created_at, TenantRow.name)
            for row in list(s.scalars(select(TenantRow).order_by(*order))):
                settings = json.loads(row.settings)
                if settings.get("uid") is None:
                    settings["uid"] = _next_uid(s)
                    row.settings = json.dumps(settings, sort_keys=True)
                    s.flush()
                    done.append(row.name)
            return done

    def update(self, tenant: Tenant) -> TenantRecord:
        with self._sessions.begin() as s:
            row = s.get(TenantRow, tenant.name)
            if row is None:
                raise TenantNotFound(f"no tenant {tenant.name}")
            row.settings, row.updated_at = _settings(tenant), self._clock.now()
            return _record(row)


def _next_uid(s: Session) -> int:
    """The uid of the lowest id block no stored tenant holds."""
    taken = {json.loads(settings).get("uid") for settings in s.scalars(select(TenantRow.settings))}
    block = 0
    while tenant_uid(block) in taken:
        block += 1
    return tenant_uid(block)


def _settings(t: Tenant) -> str:
    doc = tenant_doc(t)
    doc.pop("name")
    return json.dumps(doc, sort_keys=True)


def _record(r: TenantRow) -> TenantRecord:
    return TenantRecord(
        tenant_of({**json.loads(r.settings), "name": r.name}), r.created_at, r.updated_at
    )
