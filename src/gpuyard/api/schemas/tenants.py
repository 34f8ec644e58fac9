"""Tenant bodies: the `Tenant` dataclass as camelCase JSON, generically (new fields appear
without a change here), plus times and members."""

from __future__ import annotations

from typing import Any

from gpuyard.api.schemas.common import Out, camel_keys, iso
from gpuyard.store import TenantRecord, TenantRole, tenant_doc


class MemberOut(Out):
    user: str
    role: TenantRole


class MemberList(Out):
    members: list[MemberOut]


class MemberIn(Out):
    role: TenantRole = TenantRole.MEMBER


def tenant_out(r: TenantRecord) -> dict[str, Any]:
    return {
        **camel_keys(tenant_doc(r.tenant)),
        "createdAt": iso(r.created_at),
        "updatedAt": iso(r.updated_at),
    }


def tenant_list(records: list[TenantRecord]) -> dict[str, Any]:
    return {"tenants": [tenant_out(r) for r in records]}
