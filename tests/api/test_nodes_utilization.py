"""GPU utilisation on the node listing: read for real GPUs, never invented for fake ones."""

from __future__ import annotations

from pathlib import Path

from builders import make_node
from fake_engine import FakeEngine
from gpuyard.api.services.nodes import node_list
from gpuyard.controller import Controller
from gpuyard.model import GpuDevice, ManualClock, Node
from gpuyard.store import open_store


def test_real_gpus_show_their_utilization_and_fake_ones_none(tmp_path: Path):
    real = Node(
        "real",
        8000,
        64000,
        (
            GpuDevice(0, "GPU-aaaa", "A100-80GB", 81920, minor=0),
            GpuDevice(1, "GPU-bbbb", "A100-80GB", 81920, minor=1),
        ),
    )
    fake = make_node("fake", gpus=1)
    readings = {"GPU-aaaa": 87.0, "GPU-bbbb": None}
    ctl = Controller(
        open_store(tmp_path, clock=ManualClock()),
        FakeEngine(real, fake),
        ManualClock(),
        gpu_utilization=lambda g: readings[g.uuid],
    )
    nodes = {n.name: n for n in node_list(ctl, None).nodes}
    assert [g.utilization_pct for g in nodes["real"].gpus] == [87.0, None]
    assert [g.utilization_pct for g in nodes["fake"].gpus] == [None]
    assert nodes["real"].model_dump(by_alias=True)["gpus"][0]["utilizationPct"] == 87.0
