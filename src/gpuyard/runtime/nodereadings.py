"""One node's live readings, read on the node itself: its GPUs from its own NVML and its tasks'
cgroups (CPU time, memory). The node's agent answers them (`NodeAgent.readings`) when the
control plane asks — at a scrape of `/metrics`, and every few seconds for the idle-GPU checks —
so that every node of a cluster is observed, not only the server's host
(docs/observability.md#every-node).

The values are plain and picklable: with the Ray engine they cross from the node to the
control plane as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from gpuyard.runtime.cgroups import CgroupUsage, task_usage
from gpuyard.runtime.gpustats import GpuSample, NvmlSampler
from gpuyard.runtime.oci import cgroup_path


@dataclass(frozen=True, slots=True)
class NodeReadings:
    """What a node reads of itself now: its real GPUs (none for fake ones) and, by task key,
    the CPU time and memory of each of its tasks that has a cgroup."""

    gpus: tuple[GpuSample, ...] = ()
    tasks: Mapping[str, CgroupUsage] = field(default_factory=dict)


class NodeReader:
    """Reads a node's GPUs through `sampler` (None: no real GPU, nothing to sample) and the
    cgroups of the tasks `keys()` names."""

    def __init__(self, keys: Callable[[], list[str]], sampler: NvmlSampler | None) -> None:
        self._keys = keys
        self._sampler = sampler

    def read(self) -> NodeReadings:
        gpus = tuple(self._sampler.samples()) if self._sampler is not None else ()
        tasks = {}
        for key in self._keys():
            usage = task_usage(cgroup_path(key))
            if usage is not None:
                tasks[key] = usage
        return NodeReadings(gpus, tasks)

    def close(self) -> None:
        if self._sampler is not None:
            self._sampler.close()
