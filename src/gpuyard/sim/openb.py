"""Loaders for the Alibaba PAI "openb" 2023 GPU-sharing trace (the FGD paper's workload).

- pod list (`openb_pod_list_*.csv`): `name, cpu_milli, memory_mib, num_gpu, gpu_milli,
  gpu_spec, qos, pod_phase, creation_time, deletion_time, scheduled_time`;
- node list (`openb_node_list_gpu_node.csv`): `sn, cpu_milli, memory_mib, gpu, model`.

What is kept, dropped and normalised follows the FGD artifact and is in docs/traces.md:
every pod is kept (CPU-only ones too: they take CPU and memory on the GPU nodes);
`gpu_milli` above 1000 is clipped to 1000; a multi-GPU pod takes whole GPUs. The times,
QoS and phase are read but the packing experiment does not use them.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from gpuyard.scheduler.fragmentation import MILLI, PodShape

OPENB_PODS = "alibaba2023_openb_pod_list_default.csv"
OPENB_NODES = "alibaba2023_openb_node_list_gpu_node.csv"
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
MAX_GPUS_PER_NODE = 8


@dataclass(frozen=True, slots=True)
class OpenbPod:
    name: str
    shape: PodShape
    qos: str = ""
    phase: str = ""
    creation_s: float | None = None
    deletion_s: float | None = None
    scheduled_s: float | None = None


@dataclass(frozen=True, slots=True)
class OpenbNode:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str


@dataclass(frozen=True, slots=True)
class OpenbCluster:
    nodes: tuple[OpenbNode, ...]

    @property
    def total_gpus(self) -> int:
        return sum(n.gpus for n in self.nodes)

    @property
    def gpu_milli(self) -> int:
        return self.total_gpus * MILLI


def load_openb_pods(path: Path) -> tuple[OpenbPod, ...]:
    """Every pod of the list, in file order. Raises ValueError naming the line and column."""
    return tuple(_pod(row, line) for line, row in _rows(path, POD_COLUMNS))


def load_openb_nodes(path: Path) -> OpenbCluster:
    """The GPU nodes of the node list, in file order."""
    return OpenbCluster(tuple(_node(row, line) for line, row in _rows(path, NODE_COLUMNS)))


def _rows(path: Path, required: tuple[str, ...]):
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in required if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: missing columns {missing}; expected {', '.join(required)}")
        for row in reader:
            yield reader.line_num, row


def _int(row: dict[str, str], column: str, line: int, low: int = 0) -> int:
    text = (row.get(column) or "").strip()
    try:
        value = int(float(text))
    except ValueError:
        raise ValueError(f"line {line}: {column}={text!r} is not a number") from None
    if value < low:
        raise ValueError(f"line {line}: {column}={value} must be ≥ {low}")
    return value


def _time(row: dict[str, str], column: str) -> float | None:
    text = (row.get(column) or "").strip()
    return float(text) if text else None


def _pod(row: dict[str, str], line: int) -> OpenbPod:
    num_gpu = _int(row, "num_gpu", line)
    gpu_milli = min(_int(row, "gpu_milli", line), MILLI) if num_gpu else 0
    if num_gpu and gpu_milli == 0:
        raise ValueError(f"line {line}: num_gpu={num_gpu} with gpu_milli=0")
    if num_gpu > MAX_GPUS_PER_NODE:
        raise ValueError(f"line {line}: num_gpu={num_gpu} is more than a node has")
    shape = PodShape(
        cpu_milli=_int(row, "cpu_milli", line),
        memory_mib=_int(row, "memory_mib", line),
        num_gpu=num_gpu,
        gpu_milli=gpu_milli if num_gpu == 1 else (MILLI if num_gpu else 0),
    )
    return OpenbPod(
        name=row["name"],
        shape=shape,
        qos=row.get("qos") or "",
        phase=row.get("pod_phase") or "",
        creation_s=_time(row, "creation_time"),
        deletion_s=_time(row, "deletion_time"),
        scheduled_s=_time(row, "scheduled_time"),
    )


def _node(row: dict[str, str], line: int) -> OpenbNode:
    gpus = _int(row, "gpu", line)
    if gpus > MAX_GPUS_PER_NODE:
        raise ValueError(f"line {line}: gpu={gpus}; at most {MAX_GPUS_PER_NODE} per node")
    return OpenbNode(
        name=row["sn"],
        cpu_milli=_int(row, "cpu_milli", line),
        memory_mib=_int(row, "memory_mib", line),
        gpus=gpus,
        model=row.get("model") or "",
    )
