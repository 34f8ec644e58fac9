"""GPU fragmentation of nodes against a workload's mix of pod types (FGD, Weng et al., ATC'23).

A node's free GPUs are *fragmented* for a pod type when the pod cannot use them: the node
cannot host the pod at all (too few GPUs with enough free milli-GPU, or too little CPU), or it
can, but some of its GPUs have less free than the pod asks per GPU. The node's fragmentation
is the expected amount over the workload's pod-type mix (`PodTypeMix`):

    F(node) = Σ_t f_t · (Σ_{g: free_g < m_t} free_g   if the node can host type t
                         Σ_g free_g                   otherwise)

Types without GPUs count all free GPU milli (as in the FGD artifact). FGD places a pod where F
grows least. Everything here is pure: numpy arrays in, numbers out; no I/O, nothing mutated.
The placement policies built on it are in `scheduler/sharefit.py`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

MILLI = 1000  # milli-GPU in one GPU
MIX_COVERAGE = 0.95  # the FGD artifact keeps the most frequent types covering 95 % of pods


@dataclass(frozen=True, slots=True)
class PodShape:
    """What one pod asks for: `gpu_milli` per GPU counts only when `num_gpu == 1`."""

    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int

    @property
    def shares_gpu(self) -> bool:
        return self.num_gpu == 1 and 0 < self.gpu_milli < MILLI

    @property
    def per_gpu_milli(self) -> int:
        """Milli-GPU taken on each of its GPUs: a fraction when sharing, else a whole GPU."""
        if self.num_gpu == 0:
            return 0
        return self.gpu_milli if self.shares_gpu else MILLI

    @property
    def total_gpu_milli(self) -> int:
        return self.per_gpu_milli * self.num_gpu


@dataclass(frozen=True, slots=True)
class PodTypeMix:
    """The workload's pod types (CPU, milli-GPU per GPU, GPU count) and their frequencies."""

    cpu: np.ndarray  # [T] milli-CPU
    milli: np.ndarray  # [T] milli-GPU per GPU (0: no GPU)
    num: np.ndarray  # [T] GPU count
    freq: np.ndarray  # [T] sums to 1

    @property
    def gpu_types(self) -> np.ndarray:
        return self.milli > 0

    @property
    def cpu_only_freq(self) -> float:
        return float(self.freq[~self.gpu_types].sum())


def pod_type_mix(shapes: Iterable[PodShape], coverage: float = MIX_COVERAGE) -> PodTypeMix:
    """The most frequent pod types that cover `coverage` of the pods, renormalised.

    As the FGD artifact (`GetTypicalPods`, CPU pods included): a type is (CPU, milli-GPU per
    GPU, GPU count), memory is not part of it; types are taken by count, ties broken by the
    larger CPU, then milli-GPU, then GPU count, until their count reaches `coverage`.
    """
    counts = Counter((s.cpu_milli, s.per_gpu_milli, s.num_gpu) for s in shapes)
    if not counts:
        raise ValueError("no pods to take the pod-type mix from")
    ranked = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    total = sum(counts.values())
    kept, covered = [], 0
    for key, n in ranked:
        kept.append((key, n))
        covered += n
        if covered >= coverage * total:
            break
    arr = np.array([k for k, _ in kept], dtype=np.int64)
    freq = np.array([n for _, n in kept], dtype=np.float64) / covered
    return PodTypeMix(arr[:, 0].copy(), arr[:, 1].copy(), arr[:, 2].copy(), freq)


@dataclass(frozen=True, slots=True)
class TypeStats:
    """Per node and GPU pod type: how many GPUs have enough free milli (`fit`) and the free
    milli on GPUs that have too little (`short`); `total` free milli-GPU per node."""

    fit: np.ndarray  # [S, T'] int
    short: np.ndarray  # [S, T'] int
    total: np.ndarray  # [S] int


def type_stats(gpu_free: np.ndarray, mix: PodTypeMix) -> TypeStats:
    """`gpu_free` [S, G] milli-GPU free per GPU (0 pads nodes with fewer GPUs)."""
    m = mix.milli[mix.gpu_types]
    g = gpu_free[:, :, None]
    enough = g >= m
    fit = enough.sum(axis=1)
    short = np.where(enough, 0, g).sum(axis=1)
    return TypeStats(fit, short, gpu_free.sum(axis=1))


def fragmentation_of(stats: TypeStats, cpu_free: np.ndarray, mix: PodTypeMix) -> np.ndarray:
    """F of each node (see the module docstring) from its `type_stats` and free milli-CPU."""
    gpu = mix.gpu_types
    hosts = (stats.fit >= mix.num[gpu]) & (cpu_free[:, None] >= mix.cpu[gpu])
    lost = np.where(hosts, stats.short, stats.total[:, None])
    return lost @ mix.freq[gpu] + mix.cpu_only_freq * stats.total


def fragmentation(cpu_free: np.ndarray, gpu_free: np.ndarray, mix: PodTypeMix) -> np.ndarray:
    """F of each node: `cpu_free` [S], `gpu_free` [S, G]."""
    return fragmentation_of(type_stats(gpu_free, mix), cpu_free, mix)


def node_fragmentation(cpu_free: int, gpu_free: Iterable[int], mix: PodTypeMix) -> float:
    """F of one node."""
    gpus = np.array([list(gpu_free)], dtype=np.int64)
    return float(fragmentation(np.array([cpu_free], dtype=np.int64), gpus, mix)[0])


def fragmentation_after(
    stats: TypeStats,
    cpu_after: np.ndarray,
    taken_from: np.ndarray,
    pod: PodShape,
    mix: PodTypeMix,
) -> np.ndarray:
    """F of candidate nodes after the pod is placed, from their stats before.

    `stats` rows and `cpu_after` [C] are the candidates'; `taken_from` [C] is the free
    milli-GPU of the GPU a sharing pod would take (ignored for other pods, which take whole
    free GPUs or none).
    """
    m = mix.milli[mix.gpu_types]
    take = pod.per_gpu_milli
    if pod.shares_gpu:
        a = taken_from[:, None]
        fit = stats.fit + (a - take >= m) - (a >= m)
        short = stats.short + np.where(a - take < m, a - take, 0) - np.where(a < m, a, 0)
    else:  # whole GPUs leave `fit` (every type fits a free GPU) and never were `short`
        fit = stats.fit - pod.num_gpu
        short = stats.short
    after = TypeStats(fit, short, stats.total - pod.total_gpu_milli)
    return fragmentation_of(after, cpu_after, mix)
