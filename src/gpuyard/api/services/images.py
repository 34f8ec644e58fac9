"""What the image endpoints do: one operation on the image stores of the nodes named (or of all
nodes), through the engine's agents (`engine/nodeimages.py`), each node's answer apart.

Only platform admins reach this (the router asks `authorize_platform_admin`): the stores are
shared by every tenant, so listing them names other tenants' images, and removing or collecting
evicts them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuyard.api.errors import InvalidInput
from gpuyard.api.schemas.common import iso
from gpuyard.api.schemas.images import (
    ImageList,
    ImageOnNode,
    ImageOut,
    ImagePresence,
    ImageResults,
    NodeError,
    NodeImages,
    NodeResult,
    NodesIn,
)
from gpuyard.controller import Controller
from gpuyard.engine.nodeimages import ClusterImages, NodeAnswer, NodeImageOps
from gpuyard.runtime.errors import ImageError
from gpuyard.runtime.images import ImageInfo, normalize
from gpuyard.runtime.imagewarm import FAILED, WarmState

NODES_HINT = "name the nodes (nodes: [...]) or ask for every node (allNodes: true)"


def cluster_images(ctl: Controller) -> ClusterImages:
    if not isinstance(ctl.engine, NodeImageOps):
        raise LookupError(f"the {ctl.engine.name} engine has no image stores")
    return ClusterImages(ctl.engine)


def chosen_nodes(ctl: Controller, body: NodesIn) -> list[str]:
    """The nodes a request names (404 for one not in the cluster); 422 unless exactly one of
    `nodes` and `allNodes` is given."""
    if body.all_nodes == (body.nodes is not None):
        path = "body.allNodes" if body.all_nodes else "body.nodes"
        raise InvalidInput(f"{path}: {NODES_HINT}", [(path, NODES_HINT)])
    if body.nodes is not None and not body.nodes:
        raise InvalidInput(f"body.nodes: {NODES_HINT}", [("body.nodes", "is empty")])
    return cluster_images(ctl).targets(None if body.all_nodes else body.nodes)


def image_name(image: str, path: str = "body.image") -> str:
    """`NAME:TAG` (`:latest` added), or a 422 at `path`."""
    try:
        return normalize(image)
    except ImageError as e:
        raise InvalidInput(f"{path}: {e}", [(path, str(e))]) from e


def list_images(ctl: Controller, nodes: list[str] | None) -> ImageList:
    """Every image of the nodes named (None: all), with the nodes that hold it."""
    cluster = cluster_images(ctl)
    answers = cluster.run(cluster.targets(nodes), "list")
    held: dict[str, list[ImageOnNode]] = {}
    for a in answers:
        for info in a.value if a.ok else []:
            held.setdefault(info.name, []).append(_on_node(a.node, info))
    return ImageList(
        images=[ImageOut(name=n, nodes=held[n]) for n in sorted(held)],
        unreachable=[NodeError(node=a.node, error=a.error or "") for a in answers if not a.ok],
    )


def _on_node(node: str, info: ImageInfo) -> ImageOnNode:
    return ImageOnNode(node=node, digest=info.digest, size=info.size,
                       imported_at=iso(info.imported_at), last_used=iso(info.last_used))


def pull(ctl: Controller, image: str, nodes: list[str]) -> ImageResults:
    """Start the pull of `image` on each node (in its background); where each stands."""
    name = image_name(image)
    results = _warm_results(cluster_images(ctl).run(nodes, "warm", name, True))
    if ctl.prepull is not None:
        ctl.prepull.relist()
    return ImageResults(image=name, results=results)


def state(ctl: Controller, image: str, nodes: list[str]) -> ImageResults:
    """Where `image` stands on each node (present, pulling, failed, absent), asking nothing."""
    name = image_name(image, "query.image")
    return ImageResults(image=name,
                        results=_warm_results(cluster_images(ctl).run(nodes, "state", name)))


def _warm_results(answers: list[NodeAnswer]) -> list[NodeResult]:
    out = []
    for a in answers:
        if a.ok and isinstance(a.value, WarmState):
            out.append(NodeResult(node=a.node, state=a.value.state, message=a.value.message))
        else:
            out.append(NodeResult(node=a.node, state=FAILED, message=a.error))
    return out


def remove(ctl: Controller, image: str, nodes: list[str]) -> ImageResults:
    name = image_name(image)
    answers = cluster_images(ctl).run(nodes, "remove", name)
    if ctl.prepull is not None:
        ctl.prepull.relist()
    return ImageResults(image=name, results=[_done(a, "removed") for a in answers])


def collect(ctl: Controller, nodes: list[str], budget_gb: float | None) -> ImageResults:
    answers = cluster_images(ctl).run(nodes, "gc", budget_gb)
    if ctl.prepull is not None:
        ctl.prepull.relist()
    return ImageResults(results=[
        NodeResult(node=a.node, state="collected", removed=list(a.value)) if a.ok
        else _done(a, "collected") for a in answers
    ])


def import_file(ctl: Controller, path: Path, name: str, fmt: str, nodes: list[str]
                ) -> ImageResults:
    """Import the uploaded file at `path` as `name` on each node (its bytes go to each)."""
    name = image_name(name, "query.name")
    data = path.read_bytes()
    answers = cluster_images(ctl).run(nodes, "import", name, fmt, data)
    if ctl.prepull is not None:
        ctl.prepull.relist()
    return ImageResults(image=name, results=[_done(a, "imported") for a in answers])


def job_images(ctl: Controller, spec: dict[str, Any]) -> list[ImagePresence]:
    """Where each image of a job's spec (its own and its roles') stands on the nodes, from the
    pre-puller's last look (no call to a node): for whoever may see the job."""
    roles = spec.get("taskRoles") or {}
    names = {r.get("image") or spec.get("image") for r in roles.values() if isinstance(r, dict)}
    out = []
    for name in sorted(n for n in names if isinstance(n, str) and n):
        try:
            image = normalize(name)
        except ImageError:
            continue
        nodes = ctl.prepull.where(image) if ctl.prepull is not None else {}
        out.append(ImagePresence(image=image, nodes=nodes))
    return out


def node_images(ctl: Controller, is_admin: bool) -> dict[str, NodeImages]:
    """Node → what its store held at the pre-puller's last listing; names only for admins."""
    held = ctl.prepull.held() if ctl.prepull is not None else {}
    return {node: NodeImages(node=node, count=len(names), names=names if is_admin else None)
            for node, names in held.items()}


def _done(a: NodeAnswer, state_: str) -> NodeResult:
    if a.ok:
        return NodeResult(node=a.node, state=state_)
    return NodeResult(node=a.node, state=FAILED, message=a.error)
