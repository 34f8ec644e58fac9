"""Who may do what: the whole authorisation policy of the API, in one place.

The caller is a `UserRecord` (platform role + a role in each of their tenants). Handlers ask
one function here before they act; nothing else in the API decides access.

Jobs. `JOB_RULES` maps a tenant role to what it may do on its own jobs and on the other
jobs of the tenant. A platform admin may do everything. A job of a tenant the caller has no
role in is *invisible*: it answers 404 exactly like a job that does not exist, so job ids do
not leak across tenants. A visible job the caller may not act on answers 403.

| role in the job's tenant | see (get, list, events) | logs, secrets, | cancel, hold,  | submit |
|                          |                         | exec, services | priority       |        |
|--------------------------|-------------------------|----------------|----------------|--------|
| platform admin           | all jobs                | all jobs       | all jobs       | yes    |
| tenant-admin             | all jobs                | all jobs       | all jobs       | yes    |
| member                   | all jobs                | own jobs only  | own jobs only  | yes    |
| viewer                   | all jobs                | no             | no             | no     |
| none                     | (404)                   | (404)          | (404)          | 403    |

A resubmit is a submit (to the tenant the document names) of a job the caller sees; a bulk
cancel asks `job_actions` for each job it matches, exactly as a single cancel does. A job
array's parent is ruled as a job (its tenant, its owner); a spec's `after` may name only jobs
and arrays the submitter sees (another tenant's id reads as one that does not exist).

Secrets: a spec's secret values (secret env values, OpenPAI commands that hold a secret) are
shown to whoever may read the job's logs; everyone else who sees the job sees `<redacted>`.
So are the log lines that end a failed task's message (and its job's, and their events'):
everyone else gets the message cut before them (`api/schemas/jobs.py: shown_message`).

Tenants: a platform admin creates and updates them; a member of any role may read their
tenant; a tenant admin also manages its members. Users: a platform admin creates and lists
them; anyone may read themselves and make or revoke their own tokens.

Nodes: anyone logged in lists them (a GPU's job and tenant only if the caller may see the
job); only a platform admin cordons, drains or uncordons one.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Protocol

from gpuyard.model import PriorityClass, Tenant
from gpuyard.store import JobNotFound, JobRecord, TenantRole, UserRecord


class Owned(Protocol):
    """What the job rules read: a job's or a job array's id, tenant and owner."""

    @property
    def id(self) -> str: ...
    @property
    def tenant(self) -> str: ...
    @property
    def owner(self) -> str | None: ...


class Forbidden(Exception):
    """The caller may see the thing but not do this to it (HTTP 403); the text says why."""


class JobAction(enum.StrEnum):
    SEE = "see"
    LOGS = "read the logs of"
    CANCEL = "cancel"
    SECRETS = "read the secret values of"
    HOLD = "hold or release"
    PRIORITY = "change the priority of"
    EXEC = "exec in, or forward a port of,"
    SERVICES = "open the web services of"


ALL = frozenset(JobAction)
SEE_ONLY = frozenset({JobAction.SEE})

#: role in the job's tenant → (actions on the caller's own jobs, actions on others' jobs)
JOB_RULES: dict[TenantRole, tuple[frozenset[JobAction], frozenset[JobAction]]] = {
    TenantRole.TENANT_ADMIN: (ALL, ALL),
    TenantRole.MEMBER: (ALL, SEE_ONLY),
    TenantRole.VIEWER: (SEE_ONLY, SEE_ONLY),
}

SUBMITTERS = frozenset({TenantRole.TENANT_ADMIN, TenantRole.MEMBER})


def job_actions(caller: UserRecord, job: Owned) -> frozenset[JobAction]:
    """What `caller` may do to `job` (empty: the job is invisible to them)."""
    if caller.is_admin:
        return ALL
    role = caller.role_in(job.tenant)
    if role is None:
        return frozenset()
    own, others = JOB_RULES[role]
    return own if job.owner == caller.name else others


def authorize_job(caller: UserRecord, job: Owned, action: JobAction) -> None:
    """Raise `JobNotFound` (404) for an invisible job, `Forbidden` (403) for a refused act."""
    allowed = job_actions(caller, job)
    if not allowed:
        raise JobNotFound(job.id)
    if action not in allowed:
        raise Forbidden(_job_refusal(caller, job, action))


def _job_refusal(caller: UserRecord, job: Owned, action: JobAction) -> str:
    role = caller.role_in(job.tenant)
    if role == TenantRole.VIEWER:
        return (
            f"{caller.name} is a viewer of tenant {job.tenant} and may not {action} job "
            f"{job.id}; viewers may only see jobs"
        )
    owner = job.owner or "nobody"
    return (
        f"{caller.name} may not {action} job {job.id}: it belongs to {owner}; only its "
        f"owner, a tenant admin of {job.tenant} or a platform admin may"
    )


def can_read_secrets(caller: UserRecord, job: JobRecord) -> bool:
    """Whether `caller` sees `job`'s secret values in clear (its owner and admins)."""
    return JobAction.SECRETS in job_actions(caller, job)


def visible_tenants(caller: UserRecord) -> frozenset[str] | None:
    """The tenants whose jobs `caller` may list; None means every tenant."""
    if caller.is_admin:
        return None
    return frozenset(m.tenant for m in caller.memberships)


def authorize_submit(caller: UserRecord, tenant: str) -> None:
    if caller.is_admin or caller.role_in(tenant) in SUBMITTERS:
        return
    role = caller.role_in(tenant)
    why = f"is a viewer of tenant {tenant}" if role else f"is not a member of tenant {tenant}"
    raise Forbidden(
        f"{caller.name} {why} and may not submit jobs to it; "
        "ask a tenant admin or a platform admin to make you a member"
    )


def priority_refusal(
    caller: UserRecord, tenant: Tenant, priority: int, current: int | None = None
) -> str | None:
    """Why `caller` may not give a job of `tenant` this priority (None: they may). Above the
    tenant's `max_priority` only its tenant admins and platform admins may go; anyone who may
    act on the job may lower it (to `current` or below) whatever the maximum."""
    top = tenant.max_priority
    if top is None or priority <= top or (current is not None and priority <= current):
        return None
    if caller.is_admin or caller.role_in(tenant.name) == TenantRole.TENANT_ADMIN:
        return None
    return (
        f"{caller.name} may give priorities up to {top} in tenant {tenant.name} (its "
        "maxPriority); only a tenant admin of it or a platform admin may go higher"
    )


def priority_class_refusal(caller: UserRecord, tenant: Tenant, cls: PriorityClass) -> str | None:
    """Why `caller` may not submit a job of class `cls` to `tenant` (None: they may). `prod`
    outranks every priority in the tenant, so a member may give it only where it may give
    any priority (no maxPriority); tenant and platform admins always may."""
    if cls is not PriorityClass.PROD or tenant.max_priority is None:
        return None
    if caller.is_admin or caller.role_in(tenant.name) == TenantRole.TENANT_ADMIN:
        return None
    return (
        f"{caller.name} may not submit prod jobs in tenant {tenant.name}: prod outranks every "
        f"priority and its maxPriority is {tenant.max_priority}; only a tenant admin of it or "
        "a platform admin may"
    )


def authorize_platform_admin(caller: UserRecord, what: str) -> None:
    if not caller.is_admin:
        raise Forbidden(f"only a platform admin may {what}; {caller.name} is not one")


def can_read_tenant(caller: UserRecord, tenant: str) -> bool:
    return caller.is_admin or caller.role_in(tenant) is not None


def authorize_tenant_read(caller: UserRecord, tenant: str) -> None:
    """A tenant the caller has no role in answers 404, as if it did not exist."""
    if not can_read_tenant(caller, tenant):
        raise LookupError(f"no tenant {tenant}")


def authorize_tenant_admin(caller: UserRecord, tenant: str) -> None:
    """Managing a tenant's members: platform admins and the tenant's own admins."""
    authorize_tenant_read(caller, tenant)
    if not caller.is_admin and caller.role_in(tenant) != TenantRole.TENANT_ADMIN:
        raise Forbidden(
            f"only a tenant admin of {tenant} or a platform admin may manage its "
            f"members; {caller.name} is a {caller.role_in(tenant)}"
        )


def authorize_self_or_admin(caller: UserRecord, user: str, what: str) -> None:
    """A user's own things (their tokens, their record): themselves or a platform admin."""
    if caller.is_admin or caller.name == user:
        return
    raise Forbidden(
        f"{caller.name} may not {what} of user {user}: only {user} or a platform admin may"
    )


def readable_tenants(caller: UserRecord, names: Iterable[str]) -> list[str]:
    return [n for n in names if can_read_tenant(caller, n)]
