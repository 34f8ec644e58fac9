"""Images across the cluster: each node's image store, reached through its agent.

A node's side is `node_image_op` (run by `NodeAgent.image_op`, in the server for the local
engine, in the node's agent actor on Ray): list, warm (pull and unpack in the node's
background, `runtime/imagewarm.py`), state, remove, gc and import, on that node's own store,
with its own budget. The engines pass `image_op(node, op, *args)` through (`LocalEngine`,
`RayEngine`); `ClusterImages` fans one operation out to the named nodes or to all of them, in
parallel, each node's answer or failure apart, so a slow or lost node delays nobody's answer
by more than its call's timeout.

Access: an image imported through here is shared with every tenant by the platform admin's act
(`admin`), a warm pulls anonymously (`public`), and neither ever makes a private image (pulled
with a task's registry login) usable by another task: runtime/imageaccess.py.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from gpuyard.runtime.errors import ImageError
from gpuyard.runtime.executor import ContainerRuntime
from gpuyard.runtime.images import ImageInfo

OPS = ("list", "warm", "state", "remove", "gc", "import")
MAX_PARALLEL_NODES = 16


class UnknownNode(LookupError):
    """A node named that is not in the cluster."""


@runtime_checkable
class NodeImageOps(Protocol):
    """An engine whose nodes' image stores can be reached (local and Ray)."""

    def image_op(self, node: str, op: str, *args: Any) -> Any: ...

    def node_names(self) -> list[str]: ...


def node_image_op(runtime: ContainerRuntime, op: str, *args: Any) -> Any:
    """Run `op` on this node's image store (the agent's side). ImageError for what the store
    refuses (an unknown image, one in use, a bad reference)."""
    store, warmer = runtime.images, runtime.waiting.warmer
    if op == "list":
        return store.list()
    if op == "warm":
        return warmer.warm(*args)  # (image, retry_failed)
    if op == "state":
        return warmer.state(args[0])
    if op == "remove":
        store.remove(args[0])
        return None
    if op == "gc":
        return store.gc(args[0])
    if op == "import":  # (name, format, bytes): the file's content, written here first
        return _import_bytes(runtime, *args)
    raise ValueError(f"unknown image operation {op!r}; expected one of {', '.join(OPS)}")


def _import_bytes(runtime: ContainerRuntime, name: str, fmt: str, data: bytes) -> ImageInfo:
    """Import an image file sent as bytes: written to the store's tmp dir, imported, deleted."""
    tmp = Path(tempfile.mkdtemp(prefix="import-", dir=runtime.images.root / "tmp"))
    try:
        path = tmp / "image"
        path.write_bytes(data)
        return runtime.images.import_file(path, name, fmt)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@dataclass(frozen=True, slots=True)
class NodeAnswer:
    """One node's answer: `value` (what the operation returned) or `error` (why not)."""

    node: str
    value: Any = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class ClusterImages:
    """One image operation on several nodes of `engine` at once."""

    def __init__(self, engine: NodeImageOps) -> None:
        self.engine = engine

    def targets(self, nodes: Sequence[str] | None) -> list[str]:
        """The nodes named (None: every node); UnknownNode for a name not in the cluster."""
        known = self.engine.node_names()
        if nodes is None:
            return known
        unknown = [n for n in nodes if n not in known]
        if unknown:
            raise UnknownNode(
                f"no node {', '.join(unknown)} in the cluster (its nodes: "
                f"{', '.join(known) or 'none'})"
            )
        return list(dict.fromkeys(nodes))

    def run(self, nodes: Sequence[str], op: str, *args: Any) -> list[NodeAnswer]:
        """`op` on each node, in parallel; the answers in the nodes' order."""
        return self.each(nodes, lambda node: self.engine.image_op(node, op, *args))

    def each(self, nodes: Sequence[str], call: Callable[[str], Any]) -> list[NodeAnswer]:
        if not nodes:
            return []
        with ThreadPoolExecutor(min(MAX_PARALLEL_NODES, len(nodes))) as pool:
            return list(pool.map(lambda n: _answer(n, call), nodes))


def _answer(node: str, call: Callable[[str], Any]) -> NodeAnswer:
    try:
        return NodeAnswer(node, value=call(node))
    except ImageError as e:
        return NodeAnswer(node, error=str(e))
    except Exception as e:  # a lost node, an agent that did not answer: that node's failure
        return NodeAnswer(node, error=f"node {node} did not answer: {e}")
