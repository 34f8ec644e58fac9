"""What OpenPAI's REST v2 job endpoints do, on gpuyard's own services (routers stay thin).

Jobs are addressed as OpenPAI addresses them, `user~name`: the newest job of that owner and
name among the tenants the caller may see (gpuyard's own API allows a name twice; the OpenPAI
API refuses a second live one). Authorisation is the routers' job (`gpuyard.api.authz`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import yaml

from gpuyard.api.schemas import openpai as pai
from gpuyard.api.services import jobs as native
from gpuyard.controller import Controller
from gpuyard.model import JobState
from gpuyard.spec import FieldError, LoadedJob, SpecError, parse_job, read_document
from gpuyard.store import JobNotFound, JobRecord, UserRecord

LIVE = [str(s) for s in JobState if not s.is_final]
MAX_PAGE = 1000  # jobs in one answer of the job list (the store's cap)
TAIL_LINES = 1000  # OpenPAI's tail-mode log: its last lines


class PaiError(Exception):
    """An answer in OpenPAI's error shape that no gpuyard exception stands for."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


@dataclass(frozen=True)
class JobQuery:
    """The job list's filters, as OpenPAI's `?username=a,b&vc=&state=&offset=&limit=`."""

    usernames: tuple[str, ...] | None = None
    tenants: tuple[str, ...] | None = None
    states: tuple[str, ...] = ()
    offset: int = 0
    limit: int = MAX_PAGE


def read_openpai(ctl: Controller, body: bytes, content_type: str | None) -> LoadedJob:
    """The OpenPAI v2 document, validated and converted (`SpecError` naming each bad field,
    by OpenPAI's paths); a document without `protocolVersion` is refused: this API speaks
    OpenPAI (gpuyard's own format goes to /api/v1/jobs)."""
    doc = read_document(body, content_type)
    if isinstance(doc, dict) and "protocolVersion" not in doc:
        why = (
            "is required: this API takes OpenPAI protocol v2 documents (protocolVersion: 2); "
            "POST gpuyard's own format to /api/v1/jobs"
        )
        raise SpecError([FieldError("protocolVersion", why)])
    loaded = parse_job(doc)
    tenant = loaded.spec.tenant
    if not ctl.store.tenants.exists(tenant):
        why = f"Virtual cluster {tenant} is not found; `gpuyard whoami` lists yours"
        raise SpecError([FieldError("defaults.virtualCluster", why)])
    return loaded


def check_name_free(ctl: Controller, owner: str, name: str) -> None:
    """OpenPAI refuses a job name its user already runs: 409 while a job of that owner and
    name is live (queued, scheduled or running); a name may be used again once it ended."""
    if ctl.store.jobs.list(LIVE, owners=[owner], name=name, limit=1):
        raise PaiError(
            409, "ConflictJobError", f"Job {owner}~{name} already exists and has not ended."
        )


def submit(ctl: Controller, loaded: LoadedJob, owner: str) -> JobRecord:
    check_name_free(ctl, owner, loaded.spec.name)
    return native.submit(ctl, loaded.spec, owner, loaded)


def split_name(framework: str) -> tuple[str, str]:
    """`user~name` → (user, name); anything else names no job (404)."""
    user, sep, name = framework.partition("~")
    if not sep or not user or not name:
        raise JobNotFound(framework)
    return user, name


def find(ctl: Controller, framework: str, visible: frozenset[str] | None) -> JobRecord:
    """The newest job named `user~name` of the `visible` tenants (None: all); else 404,
    the same answer as for a job that does not exist."""
    user, name = split_name(framework)
    jobs = ctl.store.jobs.list(owners=[user], name=name, tenants=visible, limit=1)
    if not jobs:
        raise JobNotFound(framework)
    return jobs[0]


def list_jobs(
    ctl: Controller, query: JobQuery, visible: frozenset[str] | None
) -> list[dict[str, Any]]:
    """The list's items, newest first, only of the `visible` tenants (None: all)."""
    tenants = _tenants(query.tenants, visible)
    states = sorted({s for word in query.states for s in pai.STATE_FILTER[word]})
    if query.states and not states:  # UNKNOWN only: gpuyard has no such job
        return []
    jobs = ctl.store.jobs.list(
        states,
        tenants=tenants,
        owners=query.usernames,
        offset=query.offset,
        limit=min(query.limit, MAX_PAGE),
    )
    items = [pai.job_summary(j) for j in jobs]
    if query.states:  # WAITING / RUNNING / STOPPING are finer than gpuyard's states
        items = [i for i in items if i["state"] in query.states]
    return items


def _tenants(
    asked: tuple[str, ...] | None, visible: frozenset[str] | None
) -> frozenset[str] | None:
    if asked is None:
        return visible
    return frozenset(asked) if visible is None else frozenset(asked) & visible


def detail(ctl: Controller, job: JobRecord, diagnostics: bool) -> dict[str, Any]:
    """The job in OpenPAI's shape; its exit diagnostics (log lines) only with `diagnostics`."""
    return pai.job_detail(job, ctl.store.jobs.tasks(job.id), diagnostics)


def stop(ctl: Controller, job: JobRecord) -> JobRecord:
    """Stop the job (OpenPAI's `executionType: STOP`); a job that has ended stays as it is,
    as OpenPAI accepts a STOP of a completed job."""
    if job.state.is_final:
        return job
    return native.cancel(ctl, job.id)


def config_yaml(job: JobRecord, caller: UserRecord) -> str:
    """The document the job was submitted as, in YAML, secrets as the caller may see them."""
    original = native.original_document(job, caller)
    if original["format"] != "openpai":
        raise PaiError(
            404,
            "NoJobConfigError",
            f"Config of job {pai.framework_name(job)} is not found: it was submitted in "
            f"gpuyard's own format; GET /api/v1/jobs/{job.id}/original gives its spec.",
        )
    return yaml.safe_dump(original["document"], sort_keys=False, allow_unicode=True)


def log_url(
    ctl: Controller, job: JobRecord, job_attempt: int, role: str, index: int, tail: bool
) -> str:
    """gpuyard's log API for one task of an OpenPAI attempt (0-based, gpuyard's are from 1);
    a task that has not run gives OpenPAI's NoTaskLogError (404)."""
    attempt = job_attempt + 1
    try:
        task = native.pick_task(ctl, job, f"{role}/{index}", attempt)
    except LookupError as e:
        raise PaiError(
            404, "NoTaskLogError", f"Log of task {role}/{index} is not found: {e}"
        ) from None
    query: dict[str, object] = {"task": task.name, "attempt": task.attempt}
    if tail:
        query["tail"] = TAIL_LINES
    return f"/api/v1/jobs/{job.id}/logs?{urlencode(query, safe='/')}"
