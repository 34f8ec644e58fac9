"""What the job endpoints do: submit, list, show, cancel, events, logs (routers stay thin).

Authorisation is the routers' job (`gpuyard.api.authz`); these functions trust their caller,
but show a failed task's log lines (the end of its message) only to whoever may read the job's
logs (`may_read_logs`), exactly as its secret values.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from gpuyard.api.authz import (
    JobAction,
    can_read_secrets,
    job_actions,
    priority_class_refusal,
    priority_refusal,
)
from gpuyard.api.schemas import (
    EventList,
    JobDetail,
    JobList,
    JobSummary,
    event_out,
    job_summary,
    task_out,
)
from gpuyard.api.services.dependencies import after_errors
from gpuyard.api.services.images import job_images
from gpuyard.api.services.logstreams import Claim, LogStreams
from gpuyard.api.services.storage import storage_errors
from gpuyard.api.services.tenant_storage import job_storage_errors
from gpuyard.api.services.webhooks import webhook_errors
from gpuyard.controller import Controller, LogUnavailable
from gpuyard.controller.launch import host_network_refused
from gpuyard.model import JobState
from gpuyard.spec import FieldError, JobSpec, LoadedJob, SpecError, load_job
from gpuyard.spec.original import mark_secrets, unmark
from gpuyard.spec.registryauth import redact_auth
from gpuyard.store import JobNotFound, JobRecord, NewJob, TaskRecord, UserRecord
from gpuyard.store.secrets import SECRET, map_marked

REDACTED = "<redacted>"
LOG_CHUNK = 64 * 1024
FOLLOW_POLL_S = 0.2


def read_spec(ctl: Controller, body: bytes, content_type: str | None) -> JobSpec:
    """The validated spec, its tenant known to exist (else 422 with the path `tenant`)."""
    return read_job(ctl, body, content_type).spec


def read_job(ctl: Controller, body: bytes, content_type: str | None) -> LoadedJob:
    """The validated spec with its warnings and original document, its tenant known to
    exist (else 422 with the path `tenant`)."""
    loaded = load_job(body, content_type)  # raises SpecError with every bad field
    spec = loaded.spec
    if not ctl.store.tenants.exists(spec.tenant):
        raise SpecError(
            [
                FieldError(
                    "tenant", f"there is no tenant {spec.tenant!r}; `gpuyard whoami` lists yours"
                )
            ]
        )
    return loaded


def submit(
    ctl: Controller, spec: JobSpec, owner: str, loaded: LoadedJob | None = None
) -> JobRecord:
    """Queue the job for `owner` once `new_job` accepts it."""
    job = ctl.store.jobs.submit(new_job(ctl, spec, owner, loaded))
    ctl.wake()
    return job


def new_job(
    ctl: Controller, spec: JobSpec, owner: str, loaded: LoadedJob | None = None
) -> NewJob:
    """The job to store for `owner` once its dirs pass the tenant's storage roots, its
    webhook the address guard, and `hostNetwork` the tenant's permission (else SpecError).
    `loaded` (what `read_job` gave) brings the spec's warnings, recorded as events, and its
    original document."""
    tenant = ctl.store.tenants.get(spec.tenant)
    if tenant is None:  # deleted since read_spec
        raise SpecError([FieldError("tenant", f"there is no tenant {spec.tenant!r}")])
    errors = storage_errors(spec, tenant.tenant) + webhook_errors(spec, tenant.tenant)
    original = loaded.original if loaded is not None else None
    errors += job_storage_errors(ctl, spec, tenant.tenant, original)  # its own tenant's only
    if refused := host_network_refused(spec, tenant.tenant):
        errors.append(FieldError("hostNetwork", refused))
    if (user := ctl.store.users.get(owner)) is not None and (
        too_high := priority_refusal(user, tenant.tenant, spec.priority)
    ):
        errors.append(FieldError("priority", too_high))
    if user is not None and (
        no_class := priority_class_refusal(user, tenant.tenant, spec.priority_class)
    ):
        errors.append(FieldError("priorityClass", no_class))
    errors += after_errors(ctl, user, spec)  # only jobs the owner can see (dependencies.py)
    if loaded is not None and loaded.array is not None:
        errors.append(FieldError("array", "a job array is submitted with POST /api/v1/jobs"))
    if errors:
        raise SpecError(errors)
    return NewJob(
        spec.name,
        spec.tenant,
        spec.priority,
        spec.retry_count,
        spec.to_document(),
        owner=owner,
        original=mark_secrets(original) if original is not None else None,
        warnings=tuple(str(w) for w in loaded.warnings) if loaded is not None else (),
    )


def original_document(job: JobRecord, caller: UserRecord) -> dict[str, Any]:
    """The document the job was submitted as, to submit again: the OpenPAI original, else
    our spec; secrets in clear only for whoever may read them (`visible_spec`)."""
    if job.original is None:
        return {"format": "gpuyard", "document": visible_spec(job, caller)}
    # registry credentials for no one, the owner included (docs/security.md, Secrets)
    document = redact_auth(unmark(job.original, can_read_secrets(caller, job)), REDACTED)
    return {"format": "openpai", "document": document}


def list_jobs(
    ctl: Controller,
    states: list[str],
    tenant: str | None,
    limit: int,
    visible: frozenset[str] | None,
    caller: UserRecord | None = None,
) -> JobList:
    """Jobs newest first, only of the `visible` tenants (None: all); their messages' log
    lines only for jobs whose logs `caller` may read (none without a caller)."""
    tenants = (
        visible
        if tenant is None
        else (frozenset({tenant}) if visible is None or tenant in visible else frozenset())
    )
    jobs = ctl.store.jobs.list([s.upper() for s in states], tenants=tenants, limit=limit)
    return JobList(jobs=[summary_for(caller, j) for j in jobs])


def may_read_logs(caller: UserRecord | None, job: JobRecord) -> bool:
    """Whether `caller` may read `job`'s logs, and so the log lines that end its messages:
    the logs endpoint's own rule (`JobAction.LOGS`)."""
    return caller is not None and JobAction.LOGS in job_actions(caller, job)


def summary_for(caller: UserRecord | None, job: JobRecord) -> JobSummary:
    """The job's summary as `caller` may see it (log lines only if they may read the logs)."""
    return JobSummary(**job_summary(job, may_read_logs(caller, job)))


def events_for(ctl: Controller, caller: UserRecord, job: JobRecord) -> EventList:
    """The job's events as `caller` may see them (log lines only if they may read the logs)."""
    logs = may_read_logs(caller, job)
    return EventList(events=[event_out(e, logs) for e in ctl.store.jobs.events(job.id)])


def get_job(ctl: Controller, job_id: str) -> JobRecord:
    job = ctl.store.jobs.get(job_id)
    if job is None:
        raise JobNotFound(job_id)
    return job


def job_detail(ctl: Controller, job_id: str, caller: UserRecord) -> JobDetail:
    """The job as `caller` may see it: secrets and log lines only if they may read them."""
    job = get_job(ctl, job_id)
    logs = may_read_logs(caller, job)
    nodes = {n.name: n for n in ctl.store.nodes.list()}
    tasks = [task_out(t, nodes.get(t.node), logs) for t in ctl.store.jobs.tasks(job_id)]
    events = [event_out(e, logs) for e in ctl.store.jobs.events(job_id)]
    spec = visible_spec(job, caller)
    return JobDetail(**job_summary(job, logs), spec=spec, tasks=tasks, events=events,
                     images=job_images(ctl, job.spec))


def visible_spec(job: JobRecord, caller: UserRecord) -> dict[str, Any]:
    """The job's spec as `caller` may see it: its secret values (`{secret: ...}`) in clear
    for the job's owner and admins, `<redacted>` for everyone else (viewers, other members)."""
    if can_read_secrets(caller, job):
        return job.spec
    return map_marked(job.spec, SECRET, lambda _value: REDACTED, SECRET)


def cancel(ctl: Controller, job_id: str) -> JobRecord:
    job = ctl.store.jobs.request_stop(job_id, "Cancelled")
    ctl.wake()
    return job


def pick_task(ctl: Controller, job: JobRecord, task: str | None, attempt: int | None) -> TaskRecord:
    """The task whose log is asked for: `role/index` of an attempt (default: first, latest)."""
    tasks = ctl.store.jobs.tasks(job.id)
    if attempt is not None:
        tasks = [t for t in tasks if t.attempt == attempt]
    elif tasks:
        latest = max(t.attempt for t in tasks)
        tasks = [t for t in tasks if t.attempt == latest]
    if task:
        tasks = [t for t in tasks if t.name == task]
    if not tasks:
        which = " ".join(x for x in (task, f"in attempt {attempt}" if attempt else None) if x)
        not_yet = " yet: it has not started" if job.state == JobState.QUEUED else ""
        raise LookupError(f"job {job.id} has no task {which}".rstrip() + not_yet)
    return tasks[0]


@dataclass(frozen=True)
class Follow:
    """A follow: its user's slot, and how to tell that the client has left."""

    claim: Claim
    disconnected: Callable[[], Awaitable[bool]]


async def stream_log(
    ctl: Controller,
    task: TaskRecord,
    tail: int | None,
    streams: LogStreams,
    follow: Follow | None,
) -> AsyncIterator[bytes]:
    """The log as it is, then (with `follow`) what is added until the task ends or the client
    leaves; every read in a worker thread. A log that cannot be read (its node left the
    cluster) ends the stream with a line saying why."""
    try:
        async for chunk in _log_chunks(ctl, task, tail, streams, follow):
            yield chunk
    except LogUnavailable as e:
        yield f"\n[gpuyard] {e}\n".encode()
    finally:
        if follow is not None:
            follow.claim.release()


async def _log_chunks(
    ctl: Controller, task: TaskRecord, tail: int | None, streams: LogStreams, follow: Follow | None
) -> AsyncIterator[bytes]:
    logs = ctl.logs
    offset = 0
    if tail is not None:
        yield (await streams.read(logs.tail, task, tail)).encode()
        offset = await streams.read(logs.size, task) if follow else 0
    else:
        while chunk := await streams.read(logs.read, task, offset, LOG_CHUNK):
            offset += len(chunk)
            yield chunk
    while follow is not None:
        chunk = await streams.read(logs.read, task, offset, LOG_CHUNK)
        if chunk:
            offset += len(chunk)
            yield chunk
            continue
        if await streams.read(_has_ended, ctl, task):
            if rest := await streams.read(logs.read, task, offset, LOG_CHUNK):
                yield rest
            return
        if await follow.disconnected():
            return
        await anyio.sleep(FOLLOW_POLL_S)


def _has_ended(ctl: Controller, task: TaskRecord) -> bool:
    current = next(
        (t for t in ctl.store.jobs.tasks(task.job_id, task.attempt) if t.id == task.id), None
    )
    return current is None or current.state.is_final
