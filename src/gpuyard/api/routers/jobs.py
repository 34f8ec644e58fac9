"""Job endpoints: thin handlers that authorise, call one service function and return."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request, Response
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from gpuyard.api.auth import CallerDep
from gpuyard.api.authz import JobAction, authorize_job, authorize_submit
from gpuyard.api.deps import ControllerDep
from gpuyard.api.schemas import (
    Cancelled,
    EventList,
    JobDetail,
    JobList,
    JobSummary,
    Submitted,
    error_responses,
)
from gpuyard.api.schemas.jobcontrol import (
    BulkCancelIn,
    BulkCancelled,
    PriorityIn,
    ResubmitIn,
    StateName,
)
from gpuyard.api.services import batch
from gpuyard.api.services import jobcontrol as control
from gpuyard.api.services import jobs as svc
from gpuyard.api.services.logstreams import LogStreams, TooManyFollows

router = APIRouter(
    prefix="/api/v1/jobs",
    tags=["jobs"],
    responses=error_responses(401, 403, 404, 409, 422),
)

MAX_SPEC_BYTES = 1 << 20
LOG_TRUNCATED = "X-Log-Truncated"  # true: the log's cap dropped its middle
LOG_DROPPED = "X-Log-Dropped-Bytes"  # how many bytes it dropped


@router.post(
    "",
    status_code=201,
    response_model=Submitted,
    responses=error_responses(413),
    openapi_extra={
        "requestBody": {
            "content": {
                "application/yaml": {"schema": {"type": "string"}},
                "application/json": {"schema": {"type": "object"}},
            },
            "required": True,
        }
    },
)
async def submit_job(
    request: Request, response: Response, ctl: ControllerDep, caller: CallerDep
) -> Submitted:
    """Submit a job spec (our format or OpenPAI protocol v2) as YAML or JSON; the caller
    must be a member or tenant admin of the spec's tenant, and it becomes the job's owner.
    A spec with `array` submits a job array: the answer's `id` is its parent's and
    `children` its children's ids (docs/spec.md)."""
    body = await request.body()
    if len(body) > MAX_SPEC_BYTES:
        raise HTTPException(413, f"a job spec may be at most {MAX_SPEC_BYTES} bytes")
    # checks and the store's writes block: in the thread pool, not on the event loop
    return await run_in_threadpool(
        submit_body, ctl, caller, body, request.headers.get("content-type"), response
    )


def submit_body(ctl: ControllerDep, caller: CallerDep, body: bytes, content_type: str | None,
                response: Response) -> Submitted:  # fmt: skip
    """`submit_job` past reading the request: parse, authorise, store."""
    loaded = svc.read_job(ctl, body, content_type)
    authorize_submit(caller, loaded.spec.tenant)
    if loaded.array is not None:  # a job array: its parent and children in one transaction
        stored = batch.submit_loaded(ctl, caller, loaded)
        response.headers["Location"] = f"/api/v1/arrays/{stored.id}"
        return batch.submitted(stored)
    job = svc.submit(ctl, loaded.spec, caller.name, loaded)
    response.headers["Location"] = f"/api/v1/jobs/{job.id}"
    return Submitted(id=job.id, name=job.name, state=str(job.state))


@router.get("", response_model=JobList)
def list_jobs(
    ctl: ControllerDep,
    caller: CallerDep,
    state: Annotated[list[StateName] | None, Query()] = None,
    tenant: str | None = None,
    user: Annotated[str | None, Query(description="the jobs' owner")] = None,
    name: Annotated[str | None, Query(description="a glob: * and ?, any case")] = None,
    since: Annotated[str | None, Query(description="2h, 7d or an ISO time")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: Annotated[str | None, Query(description="nextCursor of the previous page")] = None,
) -> JobList:
    """Jobs of the caller's tenants (every tenant for a platform admin), newest first, a
    page at a time: `nextCursor` (null on the last page) with the same filters gives the next."""
    filters = control.Filters(tuple(state or ()), tenant, user, name, since)
    return control.list_jobs(ctl, caller, filters, limit, cursor)


@router.post("/bulk/cancel", response_model=BulkCancelled)
def cancel_jobs(body: BulkCancelIn, ctl: ControllerDep, caller: CallerDep) -> BulkCancelled:
    """Cancel every job the filters match (those of `GET /api/v1/jobs`, active states only,
    at least one) that the caller may cancel, each authorised as a single cancel; the answer
    lists what was cancelled and what was refused, and why. `dryRun`: cancel nothing."""
    return control.bulk_cancel(ctl, caller, body)


@router.get("/{job_id}", response_model=JobDetail)
def get_job(job_id: str, ctl: ControllerDep, caller: CallerDep) -> JobDetail:
    authorize_job(caller, svc.get_job(ctl, job_id), JobAction.SEE)
    return svc.job_detail(ctl, job_id, caller)


@router.get("/{job_id}/original")
def job_original(job_id: str, ctl: ControllerDep, caller: CallerDep) -> dict[str, Any]:
    """The document the job was submitted as (`format`: `openpai` or `gpuyard`), to submit
    again unchanged: POST its `document` as JSON. Secrets as in the job's spec."""
    job = svc.get_job(ctl, job_id)
    authorize_job(caller, job, JobAction.SEE)
    return svc.original_document(job, caller)


@router.post("/{job_id}/cancel", status_code=202, response_model=Cancelled)
def cancel_job(job_id: str, ctl: ControllerDep, caller: CallerDep) -> Cancelled:
    authorize_job(caller, svc.get_job(ctl, job_id), JobAction.CANCEL)
    job = control.cancel_one(ctl, job_id, caller.name)
    return Cancelled(id=job.id, state=str(job.state), stop_requested=job.stop_requested)


@router.post("/{job_id}/resubmit", status_code=201, response_model=Submitted)
def resubmit_job(
    job_id: str,
    response: Response,
    ctl: ControllerDep,
    caller: CallerDep,
    body: ResubmitIn | None = None,
) -> Submitted:
    """Submit the job's original document again (`GET .../original`) as the caller, with
    `set` applied by dotted path; a path that does not fit is a 422 at `body.set.<path>`."""
    job = svc.get_job(ctl, job_id)
    authorize_job(caller, job, JobAction.SEE)
    new = control.resubmit(ctl, caller, job, body.set if body else {})
    response.headers["Location"] = f"/api/v1/jobs/{new.id}"
    return Submitted(id=new.id, name=new.name, state=str(new.state))


@router.post("/{job_id}/hold", response_model=JobSummary)
def hold_job(job_id: str, ctl: ControllerDep, caller: CallerDep) -> JobSummary:
    """A queued job is not scheduled until released, and keeps its place (409 if not queued)."""
    job = svc.get_job(ctl, job_id)
    authorize_job(caller, job, JobAction.HOLD)
    return control.hold(ctl, job, caller)


@router.post("/{job_id}/release", response_model=JobSummary)
def release_job(job_id: str, ctl: ControllerDep, caller: CallerDep) -> JobSummary:
    job = svc.get_job(ctl, job_id)
    authorize_job(caller, job, JobAction.HOLD)
    return control.release(ctl, job, caller)


@router.post("/{job_id}/priority", response_model=JobSummary)
def set_priority(
    job_id: str, body: PriorityIn, ctl: ControllerDep, caller: CallerDep
) -> JobSummary:
    """A job's new priority, -1000 to 1000 (409 once it ended)."""
    job = svc.get_job(ctl, job_id)
    authorize_job(caller, job, JobAction.PRIORITY)
    return control.set_priority(ctl, job, body.priority, caller)


@router.get("/{job_id}/events", response_model=EventList)
def job_events(job_id: str, ctl: ControllerDep, caller: CallerDep) -> EventList:
    job = svc.get_job(ctl, job_id)
    authorize_job(caller, job, JobAction.SEE)
    return svc.events_for(ctl, caller, job)  # log lines only if the caller may read the logs


@router.get("/{job_id}/logs", response_class=StreamingResponse, responses=error_responses(429))
def job_logs(
    job_id: str,
    request: Request,
    ctl: ControllerDep,
    caller: CallerDep,
    task: Annotated[str | None, Query(pattern=r"^[A-Za-z][A-Za-z0-9_]*/\d+$")] = None,
    attempt: Annotated[int | None, Query(ge=1)] = None,
    tail: Annotated[int | None, Query(ge=0, le=100_000)] = None,
    follow: bool = False,
) -> StreamingResponse:
    """A task's stdout and stderr; `follow=true` streams until the task ends (429 beyond the
    follows one user may have open at once). A log over its cap keeps its head and tail:
    `X-Log-Truncated: true` and `X-Log-Dropped-Bytes` say so (and a marker line where)."""
    job = svc.get_job(ctl, job_id)
    authorize_job(caller, job, JobAction.LOGS)
    chosen = svc.pick_task(ctl, job, task, attempt)
    dropped = ctl.logs.dropped(chosen)  # its cap cut bytes out of the middle (logcap.py)
    streams: LogStreams = request.app.state.log_streams
    following = None
    if follow:
        try:
            following = svc.Follow(streams.claim(caller.name), request.is_disconnected)
        except TooManyFollows as e:
            raise HTTPException(429, str(e)) from None
    stream = svc.stream_log(ctl, chosen, tail, streams, following)
    if following is not None:
        following.claim.bind(stream)  # given back even if the stream never starts
    headers = {LOG_TRUNCATED: "true" if dropped else "false", LOG_DROPPED: str(dropped)}
    return StreamingResponse(stream, media_type="text/plain; charset=utf-8", headers=headers)
