"""GPU-sharing packing quality: the FGD paper's experiment (Weng et al., ATC'23) on openb.

The method, as the FGD artifact runs it (see docs/benchmarks.md for the sources):
1. the workload is the pod list in a seeded random order, inflated by pods drawn uniformly
   (with replacement) from the list until the GPU milli asked for would pass 130 % of the
   cluster's (`inflate`);
2. pods arrive one at a time and never leave; a policy places each one (`sharefit`) or it
   fails and is skipped;
3. after each pod, the arrived GPU milli and the allocated GPU milli are recorded; the
   allocation rate at k % arrived is the mean allocated share over the pods at which
   round(arrived share) = k (`curve`).

Deterministic for a seed: the workload and the run's random choices (node rank, the random
policy) have their own streams, so every policy sees the same pods for a seed.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpuyard.scheduler.fragmentation import (
    PodShape,
    PodTypeMix,
    fragmentation_of,
    pod_type_mix,
    type_stats,
)
from gpuyard.scheduler.sharefit import FreeView, Placement, make_policy
from gpuyard.sim.openb import MAX_GPUS_PER_NODE, OpenbCluster, OpenbPod

INFLATE_TO = 1.3
MAX_ARRIVED_PCT = 130


@dataclass(frozen=True, slots=True)
class PackingRun:
    """One policy on one seed: arrived and allocated GPU milli after each pod."""

    policy: str
    seed: int
    total_gpus: int
    arrived: np.ndarray  # [P] cumulative milli-GPU asked for
    used: np.ndarray  # [P] milli-GPU allocated
    failed: int
    seconds: float

    def curve(self) -> np.ndarray:
        return alloc_curve(self.arrived, self.used, self.total_gpus)


def inflate(
    pods: Sequence[OpenbPod], capacity_milli: int, rng: np.random.Generator, ratio: float
) -> list[PodShape]:
    """The pods shuffled, then grown (or cut) to `ratio` × the cluster's GPU milli."""
    ordered = sorted(pods, key=lambda p: p.name)
    shapes = [ordered[i].shape for i in rng.permutation(len(ordered))]
    asked = sum(s.total_gpu_milli for s in shapes)
    target = ratio * capacity_milli
    while asked > target and shapes:  # cut: drop pods at random
        asked -= shapes.pop(int(rng.integers(len(shapes)))).total_gpu_milli
    pool = [p.shape for p in pods]
    while True:  # grow: draw pods until the next one would pass the target (as the artifact)
        shape = pool[int(rng.integers(len(pool)))]
        if asked + shape.per_gpu_milli > target:
            return shapes
        asked += shape.total_gpu_milli
        shapes.append(shape)


class PackingState:
    """The cluster's free resources while a replay runs (mutable numpy arrays, owned here)."""

    def __init__(
        self, cluster: OpenbCluster, mix: PodTypeMix | None, rank: np.ndarray
    ) -> None:
        nodes = cluster.nodes
        self.cpu = np.array([n.cpu_milli for n in nodes], dtype=np.int64)
        self.memory = np.array([n.memory_mib for n in nodes], dtype=np.int64)
        self.gpu = np.zeros((len(nodes), MAX_GPUS_PER_NODE), dtype=np.int64)
        for i, n in enumerate(nodes):
            self.gpu[i, : n.gpus] = 1000
        self.rank = rank
        self.mix = mix
        self.stats = type_stats(self.gpu, mix) if mix is not None else None
        self.frag = fragmentation_of(self.stats, self.cpu, mix) if mix is not None else None

    def view(self) -> FreeView:
        return FreeView(self.cpu, self.memory, self.gpu, self.rank, self.stats, self.frag)

    def apply(self, pod: PodShape, at: Placement) -> None:
        i = at.node
        self.cpu[i] -= pod.cpu_milli
        self.memory[i] -= pod.memory_mib
        for g in at.gpus:
            self.gpu[i, g] -= pod.per_gpu_milli
        assert self.cpu[i] >= 0 and self.memory[i] >= 0 and self.gpu[i].min() >= 0
        if self.mix is not None and self.stats is not None and self.frag is not None:
            row = type_stats(self.gpu[i : i + 1], self.mix)
            self.stats.fit[i], self.stats.short[i] = row.fit[0], row.short[0]
            self.stats.total[i] = row.total[0]
            self.frag[i] = fragmentation_of(row, self.cpu[i : i + 1], self.mix)[0]


def replay(
    cluster: OpenbCluster,
    pods: Sequence[OpenbPod],
    policy: str,
    seed: int,
    mix: PodTypeMix | None = None,
    ratio: float = INFLATE_TO,
) -> PackingRun:
    """Place the seed's inflated workload with `policy`; `mix` defaults to the pods' own."""
    start = time.perf_counter()
    mix = mix or pod_type_mix(p.shape for p in pods)
    shapes = inflate(pods, cluster.gpu_milli, np.random.default_rng([seed, 0]), ratio)
    choose = make_policy(policy, mix)
    rng = np.random.default_rng([seed, 1])
    rank = rng.permutation(len(cluster.nodes))  # the artifact's random node-name prefixes
    state = PackingState(cluster, mix if policy.startswith("fgd") else None, rank)
    arrived = np.cumsum([s.total_gpu_milli for s in shapes], dtype=np.int64)
    used = np.zeros(len(shapes), dtype=np.int64)
    allocated, failed = 0, 0
    for k, shape in enumerate(shapes):
        at = choose(state.view(), shape, rng)
        if at is None:
            failed += 1
        else:
            state.apply(shape, at)
            allocated += shape.total_gpu_milli
        used[k] = allocated
    return PackingRun(
        policy, seed, cluster.total_gpus, arrived, used, failed, time.perf_counter() - start
    )


def alloc_curve(arrived: np.ndarray, used: np.ndarray, total_gpus: int) -> np.ndarray:
    """Allocation rate (%) at 0..130 % arrived; NaN where no pod arrived near that point.

    As the artifact's analysis: the mean over the pods at which round(arrived %) = k, or
    failing any, at which it is within k ± 1.
    """
    arrived_pct = np.round(arrived / total_gpus / 10)
    alloc_pct = used / total_gpus / 10
    out = np.full(MAX_ARRIVED_PCT + 1, np.nan)
    for k in range(MAX_ARRIVED_PCT + 1):
        near = arrived_pct == k
        if not near.any():
            near = np.abs(arrived_pct - k) <= 1
        if near.any():
            out[k] = alloc_pct[near].mean()
    return out


def compare(
    cluster: OpenbCluster,
    pods: Sequence[OpenbPod],
    policies: Sequence[str],
    seeds: Sequence[int],
    workers: int = 1,
    runs_dir: Path | None = None,
) -> list[PackingRun]:
    """Every policy on every seed (`workers` processes), in policy then seed order.

    With `runs_dir`, each run is saved there (`save_run`) and a run already saved there is
    loaded instead of replayed: a later call can add policies or seeds to a long benchmark.
    Delete the folder after changing a policy or the workload.
    """
    for name in policies:
        make_policy(name, pod_type_mix(p.shape for p in pods[:1]))  # unknown names fail early
    mix = pod_type_mix(p.shape for p in pods)
    keys = [(policy, seed) for policy in policies for seed in seeds]
    done = {k: load_run(runs_dir, *k) for k in keys} if runs_dir is not None else {}
    todo = [k for k in keys if done.get(k) is None]
    jobs = [(cluster, pods, policy, seed, mix) for policy, seed in todo]
    if workers <= 1:
        fresh = map(_replay, jobs)
        return _collect(keys, done, todo, fresh, runs_dir)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return _collect(keys, done, todo, pool.map(_replay, jobs), runs_dir)


def _collect(
    keys: list[tuple[str, int]],
    done: dict[tuple[str, int], PackingRun | None],
    todo: list[tuple[str, int]],
    fresh: Iterable[PackingRun],
    runs_dir: Path | None,
) -> list[PackingRun]:
    for key, run in zip(todo, fresh, strict=True):
        if runs_dir is not None:
            save_run(runs_dir, run)
        done[key] = run
    return [run for k in keys if (run := done[k]) is not None]


def _replay(job: tuple) -> PackingRun:
    return replay(*job)


def run_path(runs_dir: Path, policy: str, seed: int) -> Path:
    return runs_dir / f"{policy}-{seed}.npz"


def save_run(runs_dir: Path, run: PackingRun) -> Path:
    """The run as `POLICY-SEED.npz` in `runs_dir`."""
    runs_dir.mkdir(parents=True, exist_ok=True)
    path = run_path(runs_dir, run.policy, run.seed)
    with path.open("wb") as f:
        np.savez(
            f, arrived=run.arrived, used=run.used,
            meta=np.array([run.total_gpus, run.failed, run.seconds]),
        )
    return path


def load_run(runs_dir: Path, policy: str, seed: int) -> PackingRun | None:
    """The run saved by `save_run`, or None when there is none."""
    path = run_path(runs_dir, policy, seed)
    if not path.exists():
        return None
    with np.load(path) as f:
        total, failed, seconds = f["meta"]
        return PackingRun(
            policy, seed, int(total), f["arrived"], f["used"], int(failed), float(seconds)
        )
