"""Placing one GPU-sharing-era pod (CPU, memory, GPUs, milli-GPU per GPU) on nodes with
per-GPU free milli-GPU: best-fit, random and fragmentation-aware (FGD) policies.

Each policy is pure: it reads a `FreeView` of the cluster and returns a `Placement` (node and
GPU indices) or None when no node can hold the pod; the caller applies it. Feasibility and the
baselines follow the FGD artifact (hkust-adsl/kubernetes-scheduler-simulator), so that its
published curves can be reproduced (see docs/benchmarks.md):

- a node fits when it has the CPU and memory, and for a sharing pod one GPU with enough free
  milli-GPU, for a whole-GPU pod enough fully free GPUs (whole GPUs never land on shared ones);
- whole-GPU pods take the first fully free GPUs; the policies choose the node, and the GPU of
  a sharing pod;
- `bestfit`: node score ⌊100·(1 − ½·cpu_left/128 cores − ½·gpu_left/8 GPUs)⌋ after placing,
  rescaled to 0–100 over the nodes that fit (integer, as Kubernetes normalises), highest wins;
  the sharing pod takes the GPU with the least free milli that holds it;
- `random`: a node that fits, and for a sharing pod a GPU that holds it, uniformly;
- `fgd`: the artifact's FGD: score ⌊100·sigmoid(−ΔF/1000)⌋ where ΔF is the growth of the node's
  fragmentation (`scheduler/fragmentation.py`); a sharing pod is scored on each GPU that
  holds it and the node's score is its best GPU's;
- `fgd-exact` (ours): the same ΔF unquantised; ties go to the node left with less free
  milli-GPU, then the fewest fully free GPUs, then at random.
- `fgd-balance` (ours): FGD's node score; among nodes of equal score, a node with a partly
  used GPU before one whose free GPUs are all whole, then the one where the pod best evens
  out CPU against GPU (`cpu_surplus`): a pod asking more CPU per milli-GPU than the
  mix's GPU pods do on average (CPU-only pods included) goes to the node with the most CPU to
  spare, a lighter one to the node with the least; inside the node, the GPU of least ΔF.

Ties between nodes of equal score go to the node ranked first in `FreeView.rank`: the
artifact's Kubernetes fork (mental2008/kubernetes v1.20.5-minor, `selectHost`) picks the
lexicographically smallest node name, and names carry a random per-seed prefix, so the rank
is a random permutation fixed for a run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gpuyard.scheduler.fragmentation import (
    MILLI,
    PodShape,
    PodTypeMix,
    TypeStats,
    fragmentation_after,
)

MAX_NODE_CPU = 128_000  # the artifact's normalising node size for best-fit
MAX_NODE_GPU = 8 * MILLI
SCORE_MAX = 100
LAST = 1e9  # a tie-break key that puts a node after every other


@dataclass(frozen=True, slots=True)
class FreeView:
    """Free resources of N nodes, their tie-break rank (lower wins), and per node the
    `type_stats` and fragmentation that the FGD policies need."""

    cpu: np.ndarray  # [N] milli-CPU
    memory: np.ndarray  # [N] MiB
    gpu: np.ndarray  # [N, G] milli-GPU per GPU; 0 pads nodes with fewer GPUs
    rank: np.ndarray  # [N] distinct ints
    stats: TypeStats | None = None
    frag: np.ndarray | None = None


@dataclass(frozen=True, slots=True)
class Placement:
    node: int
    gpus: tuple[int, ...]  # GPU indices on the node (empty for a pod without GPUs)


Policy = Callable[[FreeView, PodShape, np.random.Generator], Placement | None]


def fitting_nodes(view: FreeView, pod: PodShape) -> np.ndarray:
    """Indices of the nodes that can hold the pod."""
    ok = (view.cpu >= pod.cpu_milli) & (view.memory >= pod.memory_mib)
    if pod.shares_gpu:
        ok &= (view.gpu >= pod.gpu_milli).any(axis=1)
    elif pod.num_gpu > 0:
        ok &= (view.gpu == MILLI).sum(axis=1) >= pod.num_gpu
    return np.flatnonzero(ok)


def whole_gpus(view: FreeView, node: int, pod: PodShape) -> tuple[int, ...]:
    """The first `num_gpu` fully free GPUs of the node."""
    free = np.flatnonzero(view.gpu[node] == MILLI)
    return tuple(int(g) for g in free[: pod.num_gpu])


def pick_best(scores: np.ndarray, rank: np.ndarray) -> int:
    """Index of a highest score; among ties the one of lowest `rank`."""
    best = np.flatnonzero(scores == scores.max())
    return int(best[0] if len(best) == 1 else best[np.argmin(rank[best])])


def _finish(view: FreeView, node: int, pod: PodShape, gpu: int | None) -> Placement:
    if pod.shares_gpu and gpu is not None:
        return Placement(node, (int(gpu),))
    return Placement(node, whole_gpus(view, node, pod))


def bestfit(view: FreeView, pod: PodShape, rng: np.random.Generator) -> Placement | None:
    nodes = fitting_nodes(view, pod)
    if len(nodes) == 0:
        return None
    cpu_left = (view.cpu[nodes] - pod.cpu_milli) / MAX_NODE_CPU * 0.5
    gpu_left = (view.gpu[nodes].sum(axis=1) - pod.total_gpu_milli) / MAX_NODE_GPU * 0.5
    raw = np.trunc((1.0 - (cpu_left + gpu_left)) * SCORE_MAX).astype(np.int64)
    lo, hi = raw.min(), raw.max()
    scores = np.zeros_like(raw) if hi == lo else (raw - lo) * SCORE_MAX // (hi - lo)
    node = int(nodes[pick_best(scores, view.rank[nodes])])
    gpu = None
    if pod.shares_gpu:
        free = view.gpu[node]
        gpu = int(np.argmin(np.where(free >= pod.gpu_milli, free, MILLI + 1)))
    return _finish(view, node, pod, gpu)


def random_fit(view: FreeView, pod: PodShape, rng: np.random.Generator) -> Placement | None:
    nodes = fitting_nodes(view, pod)
    if len(nodes) == 0:
        return None
    node = int(rng.choice(nodes))
    gpu = None
    if pod.shares_gpu:
        gpu = int(rng.choice(np.flatnonzero(view.gpu[node] >= pod.gpu_milli)))
    return _finish(view, node, pod, gpu)


def fgd(
    mix: PodTypeMix, exact: bool = False, fine_gpu: bool = False, balance: bool = False
) -> Policy:
    """FGD as the artifact scores it, or ours: `exact` (unquantised with packing tie-breaks),
    `fine_gpu` (the GPU of least exact ΔF), `balance` (ties by CPU balance, and fine_gpu)."""
    cpu_per_milli = mean_cpu_per_gpu_milli(mix)

    def policy(view: FreeView, pod: PodShape, rng: np.random.Generator) -> Placement | None:
        nodes = fitting_nodes(view, pod)
        if len(nodes) == 0:
            return None
        node_of, gpu_of, delta = _frag_growth(view, pod, mix, nodes)
        if exact:
            return _exact_choice(view, pod, node_of, gpu_of, delta, rng)
        score = np.trunc(SCORE_MAX / (1.0 + np.exp(delta / 1000.0))).astype(np.int64)
        fine = delta if fine_gpu or balance else None
        tie = balance_key(view, pod, cpu_per_milli) if balance else None
        return _quantised_choice(view, pod, node_of, gpu_of, score, fine, tie)

    return policy


def mean_cpu_per_gpu_milli(mix: PodTypeMix) -> float:
    """Milli-CPU the mix's GPU pods ask per milli-GPU, on average over their frequencies."""
    gpu = mix.gpu_types
    gpu_milli = (mix.freq[gpu] * mix.milli[gpu] * mix.num[gpu]).sum()
    return float((mix.freq[gpu] * mix.cpu[gpu]).sum() / gpu_milli) if gpu_milli else 0.0


def cpu_surplus(view: FreeView, cpu_per_milli: float) -> np.ndarray:
    """Per node, free CPU beyond what its free GPU milli would take at the mix's mean ratio,
    in whole cores (negative: GPUs there are likely to be stranded for lack of CPU)."""
    spare = view.cpu - cpu_per_milli * view.gpu.sum(axis=1)
    return np.round(spare / 1000.0)


def balance_key(view: FreeView, pod: PodShape, cpu_per_milli: float) -> np.ndarray:
    """Per node, lower is better for the pod: nodes whose free GPUs are all whole come last
    (kept for whole-GPU pods); then the most surplus for a CPU-heavy pod (CPU-only ones
    included), the least for a pod lighter on CPU than the mix's mean."""
    surplus = cpu_surplus(view, cpu_per_milli)
    heavy = pod.num_gpu == 0 or pod.cpu_milli > cpu_per_milli * pod.total_gpu_milli
    partly_used = ((view.gpu > 0) & (view.gpu < MILLI)).any(axis=1)
    whole_only = ~partly_used & (view.gpu.sum(axis=1) > 0)
    return np.where(whole_only, LAST, 0) + (-surplus if heavy else surplus)


def _frag_growth(
    view: FreeView, pod: PodShape, mix: PodTypeMix, nodes: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Candidates (node, GPU for a sharing pod, else -1) in node then GPU order, and the
    growth of their node's fragmentation if the pod goes there."""
    assert view.stats is not None and view.frag is not None, "FGD needs stats and frag"
    if pod.shares_gpu:
        rows, gpu_of = np.nonzero(view.gpu[nodes] >= pod.gpu_milli)
        node_of = nodes[rows]
        taken_from = view.gpu[node_of, gpu_of]
    else:
        node_of, gpu_of, taken_from = nodes, np.full(len(nodes), -1), np.zeros(len(nodes))
    stats = TypeStats(
        view.stats.fit[node_of], view.stats.short[node_of], view.stats.total[node_of]
    )
    cpu_after = view.cpu[node_of] - pod.cpu_milli
    after = fragmentation_after(stats, cpu_after, taken_from.astype(np.int64), pod, mix)
    return node_of, gpu_of, after - view.frag[node_of]


def _quantised_choice(
    view: FreeView,
    pod: PodShape,
    node_of: np.ndarray,
    gpu_of: np.ndarray,
    score: np.ndarray,
    fine: np.ndarray | None,
    tie: np.ndarray | None = None,
) -> Placement:
    """Node: best score (a node's = its best GPU's), ties to the least `tie` (per node of the
    view), then the lowest rank; GPU: the first best (of least `fine` when given)."""
    starts = np.flatnonzero(np.r_[True, node_of[1:] != node_of[:-1]])
    node_score = np.maximum.reduceat(score, starts)
    if tie is not None:
        best = node_score == node_score.max()
        key = tie[node_of[starts]]
        node_score = np.where(best & (key == key[best].min()), 1, 0)
    pick = pick_best(node_score, view.rank[node_of[starts]])
    node = int(node_of[starts[pick]])
    end = starts[pick + 1] if pick + 1 < len(starts) else len(score)
    local = score[starts[pick] : end]
    if fine is not None:  # ours: inside the node, the GPU of least exact growth
        local = -fine[starts[pick] : end]
    gpu = int(gpu_of[starts[pick] + int(np.argmax(local == local.max()))])
    return _finish(view, node, pod, gpu)


def _exact_choice(
    view: FreeView,
    pod: PodShape,
    node_of: np.ndarray,
    gpu_of: np.ndarray,
    delta: np.ndarray,
    rng: np.random.Generator,
) -> Placement:
    """Least fragmentation growth; then least free milli-GPU left; then fewest free GPUs;
    then the lowest rank."""
    least = np.flatnonzero(delta <= delta.min() + 1e-9)
    nodes = node_of[least]
    left = view.gpu[nodes].sum(axis=1)
    least = least[left == left.min()]
    idle = (view.gpu[node_of[least]] == MILLI).sum(axis=1)
    least = least[idle == idle.min()]
    pick = int(least[np.argmin(view.rank[node_of[least]])])
    return _finish(view, int(node_of[pick]), pod, int(gpu_of[pick]))


def make_policy(name: str, mix: PodTypeMix) -> Policy:
    """One of `PACKING_POLICIES`."""
    policies: dict[str, Policy] = {
        "bestfit": bestfit,
        "random": random_fit,
        "fgd": fgd(mix),
        "fgd-exact": fgd(mix, exact=True),
        "fgd-gpu": fgd(mix, fine_gpu=True),
        "fgd-balance": fgd(mix, balance=True),
    }
    if name not in policies:
        raise ValueError(f"unknown packing policy {name!r}; choose from {', '.join(policies)}")
    return policies[name]


PACKING_POLICIES = ("bestfit", "random", "fgd", "fgd-exact", "fgd-gpu", "fgd-balance")
