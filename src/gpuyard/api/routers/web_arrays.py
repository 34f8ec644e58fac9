"""The portal's job array page (`/arrays/{id}`): the array's summary state, its children's
counts by state, and a row per child linking to the child's job page; a job's page links
here from a child. The same service and visibility as `GET /api/v1/arrays/{id}`."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from gpuyard.api.authz import JobAction, authorize_job
from gpuyard.api.deps import ControllerDep
from gpuyard.api.routers.web import PageRoute, SessionDep, render
from gpuyard.api.services import arrays as svc

router = APIRouter(route_class=PageRoute, include_in_schema=False)


@router.get("/arrays/{array_id}")
def array_page(
    request: Request, array_id: str, ctl: ControllerDep, session: SessionDep
) -> HTMLResponse:
    array = svc.get_array(ctl, array_id)
    authorize_job(session.user, array, JobAction.SEE)
    return render(request, "array.html", session, array=svc.array_detail(ctl, array))
