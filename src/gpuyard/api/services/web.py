"""What the web portal shows beyond the REST API's bodies: a spec checked while it is typed,
example specs, a job's spec as YAML to clone, a task's log tail, the cluster grid coloured by
tenant, and the portal's CSRF token.

The data itself comes from the API's own services (`jobs`, `nodes`, `queue`), so a page shows
exactly what the API answers; authorisation stays in `gpuyard.api.authz`.
"""

from __future__ import annotations

import hashlib
import hmac
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

import gpuyard
from gpuyard.api.authz import Forbidden, authorize_submit
from gpuyard.api.schemas import NodeList
from gpuyard.api.services import jobs as job_svc
from gpuyard.api.services.storage import storage_errors
from gpuyard.api.services.tenant_storage import job_storage_errors
from gpuyard.controller import Controller, LogUnavailable
from gpuyard.spec import FieldError, FieldWarning, JobSpec, LoadedJob, SpecError
from gpuyard.store import JobRecord, UserRecord

#: the repository's examples/ (a source checkout or an editable install); none otherwise
EXAMPLES_DIR = Path(gpuyard.__file__).resolve().parents[2] / "examples"
MAX_EXAMPLE_BYTES = 64 * 1024
LOG_TAIL_LINES = 500
TENANT_HUES = (212, 165, 268, 28, 190, 318, 95, 240, 48, 290, 140, 200)
STARTER = """\
# A job: its tenant, its tasks (grouped in roles) and what each needs.
name: my-job
tenant: default
taskRoles:
  main:
    taskNumber: 1
    cpuNumber: 1
    memoryMB: 512
    gpuNumber: 0
    command: echo hello from gpuyard
"""


# -- the submit page ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Checked:
    """A spec as typed: the parsed spec when it is valid, else every error with its path."""

    spec: JobSpec | None
    errors: list[FieldError] = field(default_factory=list)
    loaded: LoadedJob | None = None  # with the spec's warnings and its OpenPAI original

    @property
    def warnings(self) -> tuple[FieldWarning, ...]:
        """Fields accepted but not honoured (yet): shown before the job is submitted."""
        return self.loaded.warnings if self.loaded is not None else ()

    @property
    def ok(self) -> bool:
        return self.spec is not None and not self.errors


def check_spec(ctl: Controller, caller: UserRecord, text: str) -> Checked:
    """Everything submitting `text` would check (spec, tenant, the caller's right to submit
    to it, storage roots), as field errors instead of an exception."""
    try:
        loaded = job_svc.read_job(ctl, text.encode(), "application/yaml")
    except SpecError as exc:
        return Checked(None, exc.errors)
    spec = loaded.spec
    try:
        authorize_submit(caller, spec.tenant)
    except Forbidden as exc:
        return Checked(spec, [FieldError("tenant", str(exc))], loaded)
    tenant = ctl.store.tenants.get(spec.tenant)
    if tenant is None:
        return Checked(spec, [], loaded)
    named = job_storage_errors(ctl, spec, tenant.tenant, loaded.original)
    return Checked(spec, storage_errors(spec, tenant.tenant) + named, loaded)


def examples() -> dict[str, str]:
    """Example specs by file name (examples/*.yaml), to start a spec from."""
    if not EXAMPLES_DIR.is_dir():
        return {}
    out = {}
    for path in sorted(EXAMPLES_DIR.glob("*.yaml")):
        if path.stat().st_size <= MAX_EXAMPLE_BYTES:
            out[path.name] = path.read_text(encoding="utf-8", errors="replace")
    return out


def spec_yaml(spec: dict[str, Any]) -> str:
    """A job's normalised spec (as the caller may see it) as YAML, to submit again (clone)."""
    return yaml.safe_dump(spec, sort_keys=False, allow_unicode=True, width=100)


# -- logs --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LogTail:
    task: str | None  # role/index of the task shown
    text: str
    note: str | None = None  # why there is no log (yet)
    dropped: int = 0  # bytes its cap cut out of the middle (truncated when > 0)


def log_tail(ctl: Controller, job: JobRecord, task: str | None) -> LogTail:
    """The last `LOG_TAIL_LINES` lines of a task's log (the caller is authorised)."""
    try:
        chosen = job_svc.pick_task(ctl, job, task, None)
    except LookupError as exc:
        return LogTail(task, "", str(exc))
    try:
        text = ctl.logs.tail(chosen, LOG_TAIL_LINES)
    except LogUnavailable as exc:
        return LogTail(chosen.name, "", str(exc))
    note = None if text else "no output yet"
    return LogTail(chosen.name, text, note, ctl.logs.dropped(chosen))


# -- the cluster grid --------------------------------------------------------------------


def gpu_tenants(ctl: Controller, nodes: NodeList) -> dict[str, str]:
    """The tenant of each job the grid names (jobs the caller may not see are not named)."""
    ids = {g.job for n in nodes.nodes for g in n.gpus if g.job}
    jobs = (ctl.store.jobs.get(j) for j in ids)
    return {j.id: j.tenant for j in jobs if j is not None}


def tenant_hue(name: str) -> int:
    """A stable colour (an HSL hue) for a tenant, the same on every page; never red, which
    the portal keeps for failures."""
    return TENANT_HUES[zlib.crc32(name.encode()) % len(TENANT_HUES)]


# -- CSRF ----------------------------------------------------------------------------------


def csrf_token(secret: str) -> str:
    """The form token of a session: derived from its API token, which only its own pages
    (HttpOnly cookie) can know, so a forged cross-site form cannot carry it."""
    return hmac.new(secret.encode(), b"gpuyard-portal-csrf", hashlib.sha256).hexdigest()[:40]


def csrf_ok(secret: str, sent: str | None) -> bool:
    return sent is not None and hmac.compare_digest(csrf_token(secret), sent)
