"""The fake engine with image stores (`image_op`, `node_names`), for controller and API tests
that need no real node: each node holds the images named in `held`, and each warm asked is
recorded with the thread that asked it."""

from __future__ import annotations

import threading
from typing import Any

from fake_engine import FakeEngine
from gpuyard.runtime.images import ImageInfo
from gpuyard.runtime.imagewarm import PULLING, WarmState
from gpuyard.runtime.types import TaskLaunch


class ImageEngine(FakeEngine):
    def __init__(self, *nodes: Any) -> None:
        super().__init__(*nodes)
        self.warms: list[tuple[str, str, str]] = []  # (node, image, thread name)
        self.held: dict[str, list[str]] = {}  # node → image names its store holds

    def node_names(self) -> list[str]:
        return [n.name for n in self.nodes()]

    def image_op(self, node: str, op: str, *args: Any) -> Any:
        if op == "list":
            return [ImageInfo(name, "sha256:" + "0" * 64, 1 << 20, 0.0, 0.0, "docker://" + name)
                    for name in self.held.get(node, [])]
        assert op == "warm", op
        self.warms.append((node, args[0], threading.current_thread().name))
        return WarmState(args[0], PULLING)

    def start(self, node: str, launch: TaskLaunch) -> str | None:
        super().start(node, launch)
        return "image present" if launch.image else None
