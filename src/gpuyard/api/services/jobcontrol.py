"""What the after-submit controls of jobs do: the list's filters and cursor, the bulk cancel,
resubmit with overrides, hold, release and priority (docs/api.md).

Routers authorise single-job actions (`gpuyard.api.authz`); the bulk cancel asks the same
`authorize_job` for each job it matches, so a member cancels only what a single cancel would
let them. Every action is an event on the job: who did it, and what.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from gpuyard.api.authz import (
    Forbidden,
    JobAction,
    authorize_job,
    authorize_submit,
    priority_refusal,
    visible_tenants,
)
from gpuyard.api.errors import Conflict, InvalidInput
from gpuyard.api.schemas import JobList, JobSummary
from gpuyard.api.schemas.jobcontrol import MAX_BULK, BulkCancelIn, BulkCancelled, Refusal
from gpuyard.api.services import arrays as array_svc
from gpuyard.api.services import jobs as job_svc
from gpuyard.controller import Controller
from gpuyard.controller.loop import held_pending
from gpuyard.model import JobState
from gpuyard.spec.fields import as_seconds
from gpuyard.spec.original import unmark
from gpuyard.spec.registryauth import redact_auth
from gpuyard.store import JobAlreadyEnded, JobFilter, JobNotQueued, JobRecord, UserRecord

ACTIVE = (JobState.QUEUED, JobState.SCHEDULED, JobState.RUNNING)
CURSOR_PREFIX = "seq:"


@dataclass(frozen=True, slots=True)
class Filters:
    """The filters of the list and the bulk cancel, as the caller gave them."""

    states: tuple[str, ...] = ()
    tenant: str | None = None
    user: str | None = None
    name: str | None = None
    since: str | None = None
    ids: tuple[str, ...] | None = None


# -- filters and the cursor ------------------------------------------------------------


def parse_since(value: str, now: float, path: str) -> float:
    """`2h` (that long ago), or an ISO 8601 date or time (UTC unless it says otherwise)."""
    seconds = as_seconds(value)
    if seconds is not None:
        return now - seconds
    try:
        t = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(
            "invalid request",
            [(path, f"must be a duration like 30m, 2h or 7d, or an ISO time; got {value!r}")],
        ) from None
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp()


def encode_cursor(seq: int) -> str:
    return base64.urlsafe_b64encode(f"{CURSOR_PREFIX}{seq}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str, path: str = "query.cursor") -> int:
    """The job sequence number a cursor stands for; a 422 at `path` for anything else."""
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        text = ""
    number = text.removeprefix(CURSOR_PREFIX)
    if not text.startswith(CURSOR_PREFIX) or not number.isdigit() or len(number) > 18:
        why = "is not a cursor this server gave (pass `nextCursor` of the previous page)"
        raise InvalidInput("invalid request", [(path, why)])
    return int(number)


def job_filter(
    ctl: Controller, visible: frozenset[str] | None, f: Filters, prefix: str
) -> JobFilter:
    """The store's filter for `f`, limited to the `visible` tenants (None: all)."""
    tenants = visible
    if f.tenant is not None:
        tenants = frozenset({f.tenant} & visible) if visible is not None else frozenset({f.tenant})
    since = parse_since(f.since, ctl.clock.now(), f"{prefix}.since") if f.since else None
    return JobFilter(
        states=tuple(s.upper() for s in f.states),
        tenants=tenants,
        owners=frozenset({f.user}) if f.user is not None else None,
        name_glob=f.name,
        since=since,
        ids=f.ids,
    )


def list_jobs(
    ctl: Controller, caller: UserRecord, f: Filters, limit: int, cursor: str | None
) -> JobList:
    """A page of the jobs `caller` may see, newest first (log lines only where they may read
    the logs), and the cursor of the next page (None: it was the last)."""
    found = job_filter(ctl, visible_tenants(caller), f, "query")
    if cursor is not None:
        found = replace(found, before_seq=decode_cursor(cursor))
    jobs = ctl.store.jobs.find(found, limit + 1)
    more = len(jobs) > limit
    jobs = jobs[:limit]
    summaries = [job_svc.summary_for(caller, j) for j in jobs]
    return JobList(
        jobs=summaries,
        arrays=array_svc.page_arrays(ctl, summaries),
        next_cursor=encode_cursor(jobs[-1].seq) if more and jobs else None,
    )


# -- cancel ----------------------------------------------------------------------------


def cancel_one(ctl: Controller, job_id: str, by: str) -> JobRecord:
    """Ask the controller to stop the job, with an event saying who asked."""
    job = job_svc.cancel(ctl, job_id)
    ctl.store.jobs.note(job_id, "CancelRequested", f"cancel asked by {by}")
    return job


def bulk_filters(body: BulkCancelIn) -> Filters:
    """The bulk cancel's filters; active states only, and at least one filter."""
    states = tuple(s.upper() for s in body.state or ())
    if ended := [s for s in states if JobState(s).is_final]:
        why = f"only QUEUED, SCHEDULED or RUNNING jobs can be cancelled, not {', '.join(ended)}"
        raise InvalidInput("invalid request", [("body.state", why)])
    f = Filters(
        states=states or tuple(str(s) for s in ACTIVE),
        tenant=body.tenant,
        user=body.user,
        name=body.name,
        since=body.since,
        ids=tuple(body.ids) if body.ids is not None else None,
    )
    if f == Filters(states=f.states) and not body.state:
        why = "name at least one filter (user, tenant, state, name, since or ids)"
        raise InvalidInput("invalid request", [("body", why)])
    return f


def bulk_cancel(ctl: Controller, caller: UserRecord, body: BulkCancelIn) -> BulkCancelled:
    """Cancel every job the filters match that the caller may cancel; say which were refused
    and why. Jobs already asked to be cancelled are not matched again."""
    visible = None if caller.is_admin else frozenset(m.tenant for m in caller.memberships)
    found = replace(job_filter(ctl, visible, bulk_filters(body), "body"), cancel_not_asked=True)
    jobs = ctl.store.jobs.find(found, MAX_BULK + 1)
    more, jobs = len(jobs) > MAX_BULK, jobs[:MAX_BULK]
    cancelled: list[str] = []
    refused: list[Refusal] = []
    for job in jobs:
        why = _refusal(ctl, caller, job, body.dry_run)
        if why is None:
            cancelled.append(job.id)
        else:
            refused.append(Refusal(id=job.id, name=job.name, tenant=job.tenant, owner=job.owner,
                                   reason=why))  # fmt: skip
    return BulkCancelled(
        matched=len(jobs), cancelled=cancelled, refused=refused, dry_run=body.dry_run, more=more
    )


def _refusal(ctl: Controller, caller: UserRecord, job: JobRecord, dry_run: bool) -> str | None:
    """Why `caller` may not cancel `job` (None: cancelled, or would be on a dry run)."""
    try:
        authorize_job(caller, job, JobAction.CANCEL)
        if not dry_run:
            cancel_one(ctl, job.id, caller.name)
    except Forbidden as e:
        return str(e)
    except JobAlreadyEnded as e:
        return str(e)
    return None


# -- hold, release, priority -----------------------------------------------------------


def hold(ctl: Controller, job: JobRecord, by: UserRecord) -> JobSummary:
    """Hold a queued job: it keeps its place and is not scheduled until released."""
    try:
        held = ctl.store.jobs.hold(job.id, by.name, held_pending(replace(job, held_by=by.name)))
    except JobNotQueued as e:
        raise Conflict(str(e)) from None
    return job_svc.summary_for(by, held)


def release(ctl: Controller, job: JobRecord, by: UserRecord) -> JobSummary:
    try:
        released = ctl.store.jobs.release(job.id, by.name)
    except JobNotQueued as e:
        raise Conflict(str(e)) from None
    ctl.wake()
    return job_svc.summary_for(by, released)


def set_priority(ctl: Controller, job: JobRecord, priority: int, by: UserRecord) -> JobSummary:
    """The job's new priority (the range is the spec's: -1000 to 1000; the body checks it),
    above its tenant's `maxPriority` only for the tenant's admins and platform admins."""
    tenant = ctl.store.tenants.get(job.tenant)
    if tenant is not None and (why := priority_refusal(by, tenant.tenant, priority, job.priority)):
        raise Forbidden(why)
    changed = ctl.store.jobs.set_priority(job.id, priority, by.name)
    ctl.wake()
    return job_svc.summary_for(by, changed)


# -- resubmit --------------------------------------------------------------------------


def resubmit(
    ctl: Controller, caller: UserRecord, job: JobRecord, sets: dict[str, Any]
) -> JobRecord:
    """Submit the job's original document again as the caller, with `sets` applied (dotted
    paths); the caller needs the submit right to the tenant the document names."""
    document = _full_document(job)
    logins_hidden = redact_auth(document, job_svc.REDACTED)  # hidden from all (security.md)
    if logins_hidden != job_svc.original_document(job, caller)["document"]:
        raise Forbidden(
            f"job {job.id}'s spec holds secret values that {caller.name} may not read; only "
            f"its owner, a tenant admin of {job.tenant} or a platform admin may resubmit it"
        )
    if logins_hidden != document and caller.name != job.owner:
        raise Forbidden(
            f"job {job.id}'s spec holds {job.owner}'s registry login (prerequisites[].auth), "
            f"which only its owner may submit again; submit the document with your own login"
        )
    document = apply_sets(copy.deepcopy(document), sets)
    loaded = job_svc.read_job(ctl, json.dumps(document).encode(), "application/json")
    authorize_submit(caller, loaded.spec.tenant)
    new = job_svc.submit(ctl, loaded.spec, caller.name, loaded)
    changed = f" with {', '.join(sorted(sets))} set" if sets else ""
    ctl.store.jobs.record_event(
        job.id, "Resubmitted", f"resubmitted as job {new.id} by {caller.name}{changed}"
    )
    ctl.store.jobs.record_event(
        new.id, "Resubmitted", f"resubmitted from job {job.id} by {caller.name}{changed}"
    )
    return new


def _full_document(job: JobRecord) -> Any:
    """The document as submitted, secrets in clear (the caller's right is checked apart)."""
    return unmark(job.original, reveal=True) if job.original is not None else job.spec


def apply_sets(document: Any, sets: dict[str, Any]) -> Any:
    """`document` with each dotted path set; a 422 naming every path that does not fit."""
    errors = []
    for path, value in sets.items():
        if (why := _set_path(document, path, value)) is not None:
            errors.append((f"body.set.{path}", why))
    if errors:
        n = len(errors)
        raise InvalidInput(f"the overrides have {n} error{'s' if n != 1 else ''}", errors)
    return document


def _set_path(document: Any, path: str, value: Any) -> str | None:
    """Set `path` in `document` in place; why not, or None when it was set."""
    parts = path.split(".")
    if not all(parts):
        return "is not a dotted path like taskRoles.worker.gpuNumber"
    node = document
    for depth, part in enumerate(parts[:-1]):
        node, why = _child(node, part, ".".join(parts[:depth]))
        if why is not None:
            return why
    return _assign(node, parts[-1], value, ".".join(parts[:-1]))


def _child(node: Any, part: str, where: str) -> tuple[Any, str | None]:
    if isinstance(node, dict):
        if part in node:
            return node[part], None
        known = ", ".join(sorted(map(str, node))) or "nothing"
        return None, f"{where or 'the document'} has no field {part!r} (it has: {known})"
    if isinstance(node, list):
        if part.isdigit() and int(part) < len(node):
            return node[int(part)], None
        return None, f"{where} is a list of {len(node)}: {part!r} is not an index in it"
    return None, f"{where} is a {type(node).__name__}, not a mapping or a list"


def _assign(node: Any, last: str, value: Any, where: str) -> str | None:
    if isinstance(node, dict):
        node[last] = value  # a new field of an existing mapping may be set
        return None
    if isinstance(node, list) and last.isdigit() and int(last) < len(node):
        node[int(last)] = value
        return None
    _, why = _child(node, last, where)
    return why
