"""Job array endpoints and the batch submit: thin handlers that authorise, call one service
function and return (docs/api.md, Job arrays and batches)."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request
from starlette.concurrency import run_in_threadpool

from gpuyard.api.auth import CallerDep
from gpuyard.api.authz import JobAction, authorize_job
from gpuyard.api.deps import ControllerDep
from gpuyard.api.schemas import Out, error_responses
from gpuyard.api.schemas.arrays import ArrayCancelled, ArrayDetail
from gpuyard.api.schemas.jobs import Submitted
from gpuyard.api.services import arrays as svc
from gpuyard.api.services import batch
from gpuyard.spec import read_document

router = APIRouter(tags=["jobs"], responses=error_responses(401, 403, 404, 409, 422))

MAX_BATCH_BYTES = 8 << 20


class BatchSubmitted(Out):
    jobs: list[Submitted]


@router.post(
    "/api/v1/jobs:batch",
    status_code=201,
    response_model=BatchSubmitted,
    responses=error_responses(413),
    openapi_extra={
        "requestBody": {
            "content": {"application/json": {"schema": {"type": "object"}}},
            "required": True,
        }
    },
)
async def submit_batch(request: Request, ctl: ControllerDep, caller: CallerDep) -> BatchSubmitted:
    """Submit many specs at once, `{jobs: [spec, ...]}` (JSON or YAML; arrays allowed): all
    are checked first (every error at `jobs[i].<path>`), then stored in one transaction, or
    none is. The answer lists each job's (or array's) id in the order given."""
    body = await request.body()
    if len(body) > MAX_BATCH_BYTES:
        raise HTTPException(413, f"a batch may be at most {MAX_BATCH_BYTES} bytes")
    # checks and the store's writes block: in the thread pool, not on the event loop
    return await run_in_threadpool(
        submit_batch_body, ctl, caller, body, request.headers.get("content-type")
    )


def submit_batch_body(ctl: ControllerDep, caller: CallerDep, body: bytes,
                      content_type: str | None) -> BatchSubmitted:  # fmt: skip
    """`submit_batch` past reading the request: parse, check every spec, store all."""
    docs = batch.batch_docs(read_document(body, content_type, MAX_BATCH_BYTES))
    stored = batch.submit_batch(ctl, caller, docs)
    return BatchSubmitted(jobs=[batch.submitted(s) for s in stored])


@router.get("/api/v1/arrays/{array_id}", response_model=ArrayDetail)
def get_array(array_id: str, ctl: ControllerDep, caller: CallerDep) -> ArrayDetail:
    """A job array: its summary state, its children's counts by state and every child."""
    array = svc.get_array(ctl, array_id)
    authorize_job(caller, array, JobAction.SEE)
    return svc.array_detail(ctl, array)


@router.post("/api/v1/arrays/{array_id}/cancel", status_code=202, response_model=ArrayCancelled)
def cancel_array(array_id: str, ctl: ControllerDep, caller: CallerDep) -> ArrayCancelled:
    """Cancel every child of the array that has not ended (who may: as a job's cancel)."""
    array = svc.get_array(ctl, array_id)
    authorize_job(caller, array, JobAction.CANCEL)
    return svc.cancel_array(ctl, array, caller.name)
