"""Reading the Ray cluster's node table: which Ray node is which gpuyard node, and its size.

Pure functions over the dicts that `ray.nodes()` returns, so they can be tested without Ray.

- name: the node's label `gpuyard.io/node-name`, else its hostname; nodes that share a hostname
  (several Ray nodes on one machine) are told apart by their IP: `host-127.0.0.3`.
- CPUs and memory: the node's Ray resources `CPU` and `memory` (what `ray start --num-cpus /
  --memory` declared, or what Ray detected).
- fake GPUs: resources `gpuyard_fake_gpus_<TYPE>: <count>`, e.g.
  `ray start --resources '{"gpuyard_fake_gpus_A100-80GB": 4}'`; several types add up, in
  name order. A node without them gets its GPUs from NVML, on the node, by its agent.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

NAME_LABEL = "gpuyard.io/node-name"
FAKE_GPU_RESOURCE = "gpuyard_fake_gpus_"
MB = 1024 * 1024
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")


@dataclass(frozen=True, slots=True)
class RayNode:
    """One live Ray node, as gpuyard sees it (its GPUs come later, from its agent)."""

    name: str
    node_id: str  # Ray's NodeID (hex)
    address: str  # NodeManagerAddress: the IP the other nodes reach it at
    cpu_milli: int
    memory_mb: int
    fake_gpus: str | None  # a `parse_fake_gpus` list, e.g. "4xA100-80GB,2xV100"; None: NVML


def live_nodes(entries: Iterable[Mapping[str, Any]]) -> list[RayNode]:
    """The live nodes of `ray.nodes()`, named; nodes whose name is not usable are left out."""
    alive = [e for e in entries if e.get("Alive")]
    hosts = Counter(str(e.get("NodeManagerHostname", "")) for e in alive if not _label_name(e))
    nodes = [_ray_node(e, hosts) for e in alive]
    return sorted((n for n in nodes if n is not None), key=lambda n: n.name)


def _label_name(entry: Mapping[str, Any]) -> str | None:
    labels = entry.get("Labels") or {}
    return labels.get(NAME_LABEL) or None


def _ray_node(entry: Mapping[str, Any], hosts: Counter[str]) -> RayNode | None:
    address = str(entry.get("NodeManagerAddress", ""))
    host = str(entry.get("NodeManagerHostname", "")) or address
    name = _label_name(entry) or (host if hosts[host] <= 1 else f"{host}-{address}")
    if not _NAME.fullmatch(name):
        return None
    resources: Mapping[str, float] = entry.get("Resources") or {}
    return RayNode(
        name=name,
        node_id=str(entry["NodeID"]),
        address=address,
        cpu_milli=round(float(resources.get("CPU", 0)) * 1000),
        memory_mb=int(float(resources.get("memory", 0)) // MB),
        fake_gpus=fake_gpu_list(resources),
    )


def fake_gpu_list(resources: Mapping[str, float]) -> str | None:
    """`{"gpuyard_fake_gpus_A100-80GB": 4}` → `"4xA100-80GB"`; None without such resources."""
    items = []
    for key in sorted(resources):
        if key.startswith(FAKE_GPU_RESOURCE):
            count = math.floor(float(resources[key]))
            gpu_type = key[len(FAKE_GPU_RESOURCE) :]
            if count > 0 and gpu_type:
                items.append(f"{count}x{gpu_type}")
    return ",".join(items) or None
