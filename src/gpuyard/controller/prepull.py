"""Pre-pulls: the images of queued jobs warmed on the nodes they will likely start on, and where
each image is present (for the job page and `gpuyard show`).

Every `PLAN_INTERVAL_S` the controller, after its cycle, plans (`warm_targets`, pure): for the
first `MAX_JOBS` queued, not held jobs (queue position, then submission), each role's image on
the nodes that could take one of its tasks — schedulable, of its GPU type and size — with the
most free capacity of that flavor first, as many nodes as the role has tasks. It hands the plan
to `PrePuller`, whose own thread asks each node to warm the image (`image_op(node, "warm")`:
the node's pull queue pulls it in the background, `runtime/imagewarm.py`). Nothing of this
runs in the cycle but the plan; a node's call is made once per (node, image) in `ASK_AGAIN_S`,
and each node warms at most a few images at once. The same thread lists every node's images
every `LIST_INTERVAL_S` (an index read on each node): `where(image)` answers from that list and
the warms' answers, without a call.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gpuyard.engine.nodeimages import ClusterImages, NodeImageOps
from gpuyard.model import Node
from gpuyard.runtime.errors import ImageError
from gpuyard.spec import JobSpec
from gpuyard.store import TaskRecord

log = logging.getLogger("gpuyard.controller.prepull")

PLAN_INTERVAL_S = 5.0
MAX_JOBS = 8  # queued jobs whose images are warmed (the heads of the queue)
ASK_AGAIN_S = 60.0  # a (node, image) warm is asked at most this often
LIST_INTERVAL_S = 15.0


@dataclass(frozen=True, slots=True)
class Warm:
    node: str
    image: str


def warm_targets(
    specs: Sequence[JobSpec], nodes: Sequence[Node], active: Iterable[TaskRecord]
) -> list[Warm]:
    """Where the images of `specs` (queued jobs, in queue order) should be warmed: for each role
    with an image, the schedulable nodes that fit one of its tasks, most free GPUs of its type
    first, at most as many as it has tasks. In order, without repeats."""
    used: dict[str, set[int]] = {}
    cpu: dict[str, int] = {}
    for t in active:
        used.setdefault(t.node, set()).update(t.gpus)
        cpu[t.node] = cpu.get(t.node, 0) + t.cpu_milli
    out: dict[Warm, None] = {}
    for spec in specs:
        for name, role in spec.task_roles.items():
            image = spec.image_of(name)
            if not image:
                continue
            fits = [n for n in nodes if n.schedulable and _fits(n, role.gpu_type, role.whole_gpus,
                                                                role.shares_gpu)]
            fits.sort(key=lambda n: (-_free_gpus(n, role.gpu_type, used.get(n.name, set())),
                                     cpu.get(n.name, 0) - n.cpu_milli, n.name))
            for n in fits[: role.task_number]:
                out.setdefault(Warm(n.name, image))
    return list(out)


def _of_type(node: Node, gpu_type: str | None) -> list[int]:
    return [g.index for g in node.gpus if g.healthy and (gpu_type is None or g.type == gpu_type)]


def _fits(node: Node, gpu_type: str | None, whole: int, shares: bool) -> bool:
    need = whole or (1 if shares else 0)
    return need == 0 or len(_of_type(node, gpu_type)) >= need


def _free_gpus(node: Node, gpu_type: str | None, used: set[int]) -> int:
    return len([i for i in _of_type(node, gpu_type) if i not in used])


class PrePuller:
    """The warms and the image lists of every node, on a thread of their own."""

    def __init__(self, engine: NodeImageOps) -> None:
        self._cluster = ClusterImages(engine)
        self._lock = threading.Lock()
        self._plan: list[Warm] = []
        self._asked: dict[Warm, float] = {}  # when each warm was last asked
        self._states: dict[Warm, str] = {}  # what the node answered: pulling, failed: ...
        self._lists: dict[str, set[str]] = {}  # node → the image names it holds
        self._listed_at = float("-inf")
        self._wake = threading.Event()
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._halt.clear()
        self._thread = threading.Thread(target=self._run, name="gpuyard-prepull", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._halt.set()
        self._wake.set()
        if self._thread:
            self._thread.join(timeout=10)

    def offer(self, plan: list[Warm]) -> None:
        """The warms wanted now (the controller's plan); the thread asks the nodes."""
        with self._lock:
            self._plan = plan
        self._wake.set()

    def relist(self) -> None:
        """List every node's images at the next turn (after a pull, a removal, a gc)."""
        with self._lock:
            self._listed_at = float("-inf")
        self._wake.set()

    def where(self, image: str) -> dict[str, str]:
        """Node → `present`, `pulling` or `failed: why`, for each node that holds `image` or
        was asked to warm it (nodes that never heard of it are left out)."""
        with self._lock:
            out = {w.node: s for w, s in self._states.items() if w.image == image}
            out.update({n: "present" for n, names in self._lists.items() if image in names})
        return dict(sorted(out.items()))

    def held(self) -> dict[str, list[str]]:
        """Node → the image names its store held at the last listing."""
        with self._lock:
            return {n: sorted(names) for n, names in sorted(self._lists.items())}

    def _run(self) -> None:
        while not self._halt.is_set():
            try:
                self._turn()
            except Exception:  # the next turn tries again
                log.exception("image pre-pull turn failed")
            self._wake.wait(LIST_INTERVAL_S / 3)
            self._wake.clear()

    def _turn(self) -> None:
        now = time.monotonic()
        with self._lock:
            due = [w for w in self._plan if now - self._asked.get(w, float("-inf")) >= ASK_AGAIN_S]
            for w in due:
                self._asked[w] = now
            list_due = now - self._listed_at >= LIST_INTERVAL_S
        by_node: dict[str, list[str]] = {}
        for w in due:
            by_node.setdefault(w.node, []).append(w.image)
        for answer in self._cluster.each(list(by_node), lambda n: self._warm(n, by_node[n])):
            failed = f"failed: {answer.error}"
            states = answer.value if answer.ok else dict.fromkeys(by_node[answer.node], failed)
            with self._lock:
                self._states.update({Warm(answer.node, i): s for i, s in states.items()})
        if list_due or due:
            self._list()

    def _warm(self, node: str, images: list[str]) -> dict[str, str]:
        """Ask `node` to warm each image (one after the other: each call only enqueues)."""
        out = {}
        for image in images:
            try:
                warmed = self._cluster.engine.image_op(node, "warm", image)
            except ImageError as e:
                out[image] = f"failed: {e}"
                continue
            out[image] = warmed.state if warmed.message is None else (
                f"{warmed.state}: {warmed.message}")
        return out

    def _list(self) -> None:
        nodes = self._cluster.engine.node_names()
        answers = self._cluster.run(nodes, "list")
        lists = {a.node: {i.name for i in a.value} for a in answers if a.ok}
        with self._lock:
            self._lists = lists
            self._listed_at = time.monotonic()
            self._states = {w: s for w, s in self._states.items()
                            if w.node in lists and w.image not in lists[w.node]}
