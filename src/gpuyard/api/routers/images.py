"""Image endpoints: the image stores of the cluster's nodes — list, pull, state, remove, gc,
import — on nodes named or on all of them (`gpuyard image ... --node N | --all-nodes`).
Platform admins only: the stores are shared by all tenants (docs/images.md, docs/auth.md)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.concurrency import run_in_threadpool

from gpuyard.api.auth import CallerDep
from gpuyard.api.authz import authorize_platform_admin
from gpuyard.api.deps import ControllerDep
from gpuyard.api.errors import InvalidInput
from gpuyard.api.schemas import error_responses
from gpuyard.api.schemas.images import (
    ImageGcIn,
    ImageList,
    ImagePullIn,
    ImageRemoveIn,
    ImageResults,
    NodesIn,
)
from gpuyard.api.services import images

router = APIRouter(
    prefix="/api/v1/images", tags=["images"], responses=error_responses(401, 403, 404, 422)
)

NodeQuery = Annotated[list[str] | None, Query(alias="node", max_length=1000)]
FORMATS = ("auto", "rootfs", "oci-archive", "docker-archive")
MAX_UPLOAD_BYTES = int(os.environ.get("GPUYARD_IMAGE_UPLOAD_MAX_MB", "1024")) << 20


@router.get("", response_model=ImageList)
def list_images(ctl: ControllerDep, caller: CallerDep, node: NodeQuery = None) -> ImageList:
    """Every image of the nodes named (`node=`, repeated; none: all), with where it is."""
    authorize_platform_admin(caller, "list the nodes' images")
    return images.list_images(ctl, node)


@router.get("/state", response_model=ImageResults)
def image_state(
    image: str, ctl: ControllerDep, caller: CallerDep, node: NodeQuery = None
) -> ImageResults:
    """Where `image` stands on each node (present, pulling, failed, absent); asks for nothing."""
    authorize_platform_admin(caller, "read the nodes' images")
    chosen = images.chosen_nodes(ctl, NodesIn(nodes=node, all_nodes=not node))
    return images.state(ctl, image, chosen)


@router.post("/pull", response_model=ImageResults)
def pull(body: ImagePullIn, ctl: ControllerDep, caller: CallerDep) -> ImageResults:
    """Pull the image on each node in its background (a failed pull is tried again); poll
    `/state` for the end."""
    authorize_platform_admin(caller, "pull images onto nodes")
    return images.pull(ctl, body.image, images.chosen_nodes(ctl, body))


@router.post("/remove", response_model=ImageResults)
def remove(body: ImageRemoveIn, ctl: ControllerDep, caller: CallerDep) -> ImageResults:
    """Remove the image from each node (refused on a node where a task uses it)."""
    authorize_platform_admin(caller, "remove images from nodes")
    return images.remove(ctl, body.image, images.chosen_nodes(ctl, body))


@router.post("/gc", response_model=ImageResults)
def collect(body: ImageGcIn, ctl: ControllerDep, caller: CallerDep) -> ImageResults:
    """Each node drops its least recently used images not in use until it fits the budget
    (`budgetGB`; absent: the node's own, GPUYARD_IMAGE_BUDGET_GB)."""
    authorize_platform_admin(caller, "collect the nodes' images")
    budget = float(body.budget_gb) if body.budget_gb is not None else None
    return images.collect(ctl, images.chosen_nodes(ctl, body), budget)


@router.post("/import", response_model=ImageResults)
async def import_image(
    request: Request,
    name: str,
    ctl: ControllerDep,
    caller: CallerDep,
    fmt: Annotated[str, Query(alias="format")] = "auto",
    node: NodeQuery = None,
    all_nodes: Annotated[bool, Query(alias="allNodes")] = False,
) -> ImageResults:
    """Import the request's body (a rootfs tarball, an OCI archive or a docker-archive, as
    `application/octet-stream`) as `name` on each node named."""
    authorize_platform_admin(caller, "import images onto nodes")
    if fmt not in FORMATS:
        raise InvalidInput(f"query.format: expected one of {', '.join(FORMATS)}",
                           [("query.format", f"expected one of {', '.join(FORMATS)}")])
    chosen = images.chosen_nodes(ctl, NodesIn(nodes=node, all_nodes=all_nodes))
    with tempfile.TemporaryDirectory(prefix="gpuyard-import-") as tmp:
        path = Path(tmp) / "image"
        await _receive(request, path)
        return await run_in_threadpool(images.import_file, ctl, path, name, fmt, chosen)


async def _receive(request: Request, path: Path) -> None:
    """The body into `path`, at most MAX_UPLOAD_BYTES (422 beyond)."""
    size = 0
    with path.open("wb") as out:
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_UPLOAD_BYTES:
                limit = f"at most {MAX_UPLOAD_BYTES >> 20} MB (GPUYARD_IMAGE_UPLOAD_MAX_MB)"
                raise InvalidInput(f"body: {limit}", [("body", limit)])
            out.write(chunk)
    if size == 0:
        raise InvalidInput("body: the image file is empty", [("body", "is empty")])
