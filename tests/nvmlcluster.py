"""A Ray cluster on this machine whose GPUs look real (issue 20): every node loads the fake NVML
library (tests/fakes/fake_nvml.c, docs/gpus.md) through its raylet's environment, with GPUs,
utilisation and a health file of its own, and device nodes made with mknod
(`GPUYARD_DEV_ROOT`). So each node's agent finds its GPUs through the real pynvml, checks their
health and reads them for the metrics and the idle-GPU checks, as on GPU machines.

Used by tests/ray/test_ray_nodemetrics.py and bench/metrics_scrape.py. mknod needs root.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from raycluster import NODES, RayCluster

NVIDIA_MAJOR = 195


def gpu_uuid(node: str, index: int) -> str:
    """A UUID of NVML's form, unique to the node (its name's last letter) and index."""
    return f"GPU-{node[-1] * 8}-0000-4000-8000-{index:012d}"


class NvmlRayCluster(RayCluster):
    """Nodes with no declared GPUs: each finds `gpus` of its own through the fake NVML, busy at
    `util[node]` %. `health[node]` is the node's FAKE_NVML_HEALTH_FILE (`1 xid 79` makes its
    GPU 1 unhealthy)."""

    def __init__(
        self, data_dir: Path, nvml_dir: Path, util: Mapping[str, int], gpus: int = 2
    ) -> None:
        self.nvml_dir = nvml_dir
        self.util = dict(util)
        self.gpus = gpus
        self.health = {name: data_dir.parent / f"health-{name}" for name in NODES}
        super().__init__(data_dir)

    def node_args(self, name: str, ip: str) -> dict:
        self.health[name].write_text("")
        env = {
            "LD_LIBRARY_PATH": str(self.nvml_dir),
            "FAKE_NVML_GPUS": self.nvml_gpus(name),
            "FAKE_NVML_HEALTH_FILE": str(self.health[name]),
            "GPUYARD_DEV_ROOT": str(self.dev_root(self.data_dir.parent / f"dev-{name}")),
        }
        return {**super().node_args(name, ip), "resources": {}, "env_vars": env}

    def nvml_gpus(self, node: str) -> str:
        """`name|uuid|memory_mb|minor|util_gpu|util_mem|temp_c|power_mw|used_mb` per GPU."""
        return ";".join(
            f"NVIDIA A100-SXM4-80GB|{gpu_uuid(node, i)}|81920|{i}|{self.util[node]}|5|{50 + i}"
            f"|200000|2048"
            for i in range(self.gpus)
        )

    def dev_root(self, path: Path) -> Path:
        """/dev/nvidia<minor> of the node's GPUs (the real major; no driver behind them)."""
        path.mkdir(parents=True)
        for i in range(self.gpus):
            os.mknod(path / f"nvidia{i}", 0o666 | stat.S_IFCHR, os.makedev(NVIDIA_MAJOR, i))
        return path
