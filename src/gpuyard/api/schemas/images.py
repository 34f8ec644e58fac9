"""Image request and response bodies: the image stores of the cluster's nodes (admins only)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr

from gpuyard.api.schemas.common import Out, camel


class NodesIn(BaseModel):
    """Which nodes: `nodes` by name, or `allNodes: true` (one of them)."""

    model_config = ConfigDict(alias_generator=camel, populate_by_name=True, extra="forbid")

    nodes: list[StrictStr] | None = Field(None, max_length=1000)
    all_nodes: StrictBool = False


class ImagePullIn(NodesIn):
    image: StrictStr = Field(max_length=255)


class ImageRemoveIn(NodesIn):
    image: StrictStr = Field(max_length=255)


class ImageGcIn(NodesIn):
    budget_gb: StrictFloat | StrictInt | None = Field(None, alias="budgetGB", ge=0, le=1 << 20)


class ImageOnNode(Out):
    node: str
    digest: str
    size: int  # bytes on disk: blobs, plus the unpacked root once unpacked
    imported_at: str | None  # ISO time
    last_used: str | None


class ImageOut(Out):
    name: str  # NAME:TAG
    nodes: list[ImageOnNode]  # the nodes that hold it


class NodeError(Out):
    node: str
    error: str


class ImageList(Out):
    images: list[ImageOut]
    unreachable: list[NodeError] = []  # nodes that did not answer (their images are not shown)


class ImagePresence(Out):
    """Where one of a job's images stands on the nodes that know of it: node → `present`,
    `pulling`, `busy` or `failed: why` (nodes never asked for it are left out)."""

    image: str
    nodes: dict[str, str]


class NodeImages(Out):
    """What a node's store holds, for the cluster page: the names for a platform admin, only
    the count for everyone else (they would name other tenants' images)."""

    node: str
    count: int
    names: list[str] | None = None


class NodeResult(Out):
    """One node's answer: `state` present | pulling | busy | absent | removed | collected |
    imported | failed, with `message` (why, for failed or busy) and `removed` (a gc's)."""

    node: str
    state: str
    message: str | None = None
    removed: list[str] = []


class ImageResults(Out):
    image: str | None = None
    results: list[NodeResult]
