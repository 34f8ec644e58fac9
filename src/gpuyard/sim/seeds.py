"""Several seeds of one comparison, each (policy, seed) in a process of its own, and their
summaries by policy (mean ± standard deviation: sim/seedtable.py).

A seed draws the checkpoint phases and, with `jitter_s`, the arrival offsets. Each seed also
runs the private clusters (`fifo-private`, sim/private.py) once: their queueing delays fill
the "worse off than private" rows of that seed's other policies.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace

from gpuyard.scheduler.baselines import canonical_policy
from gpuyard.sim.engine import SimConfig, simulate, with_jitter
from gpuyard.sim.metrics import Summary, queueing_by_tenant, summarize, with_private
from gpuyard.sim.private import PRIVATE, private_result
from gpuyard.sim.traces import Trace

_TRACE: list[Trace] = []  # the trace of this worker process (set once by `_adopt`)


@dataclass(frozen=True, slots=True)
class SeedRun:
    """One policy on one seed; `private`: the tenants' private queueing delays of that seed
    (on the `fifo-private` run, which computes them; empty on the others)."""

    policy: str
    seed: int
    summary: Summary
    private: dict[str, float]


def parse_seeds(text: str) -> list[int]:
    """`0-4`, `0,3,7`, `0-2,9` or `5` → the seeds, in the order given, each once."""
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if m is None or (m[2] is not None and int(m[2]) < int(m[1])):
            raise ValueError(f"--seeds {text!r}: ranges like 0-4 or lists like 0,3,7")
        first, last = int(m[1]), int(m[2] if m[2] is not None else m[1])
        seeds += [s for s in range(first, last + 1) if s not in seeds]
    if not seeds:
        raise ValueError(f"--seeds {text!r}: no seed")
    return seeds


def run_seeds(
    trace: Trace,
    policies: Sequence[str],
    base: SimConfig,
    seeds: Sequence[int],
    jobs: int | None = None,
    progress: Callable[[SeedRun], None] = lambda _: None,
) -> list[SeedRun]:
    """Every policy on every seed (`jobs` processes, default one per core; 1: here, one after
    the other), ordered by policy then seed, private delays filled in; `fifo-private` first
    unless asked for elsewhere (it runs anyway, and the gain rows need it)."""
    tasks = [(p, s) for p in map(canonical_policy, policies) if p != PRIVATE for s in seeds]
    tasks += [(PRIVATE, s) for s in seeds]  # last: the shortest, they fill in at the end
    configs = [replace(base, policy=p, seed=s) for p, s in tasks]
    workers = min(jobs or os.cpu_count() or 1, len(configs))
    done: list[SeedRun] = []
    if workers <= 1:
        _adopt(trace)
        for c in configs:
            done.append(run_one(c))
            progress(done[-1])
    else:
        with ProcessPoolExecutor(workers, initializer=_adopt, initargs=(trace,)) as pool:
            for future in as_completed([pool.submit(run_one, c) for c in configs]):
                done.append(future.result())
                progress(done[-1])
    names = [canonical_policy(p) for p in policies]
    return _ordered(done, names if PRIVATE in names else [PRIVATE, *names], seeds)


def _adopt(trace: Trace) -> None:
    _TRACE[:] = [trace]


def run_one(config: SimConfig) -> SeedRun:
    """`config.policy` on this process's trace with `config.seed` (`fifo-private`: the
    private clusters, whose delays it also returns)."""
    trace = with_jitter(_TRACE[0], config)
    if config.policy == PRIVATE:
        result = private_result(trace, config)
        private = queueing_by_tenant(result)
        return SeedRun(PRIVATE, config.seed, summarize(result, private), private)
    return SeedRun(config.policy, config.seed, summarize(simulate(trace, config)), {})


def _ordered(runs: list[SeedRun], policies: list[str], seeds: Sequence[int]) -> list[SeedRun]:
    """Runs of `policies`, policy by policy, seed by seed, each with its seed's private
    delays."""
    private = {r.seed: r.private for r in runs if r.policy == PRIVATE}
    by_key = {(r.policy, r.seed): r for r in runs}
    out = []
    for p in policies:
        for s in seeds:
            r = by_key[p, s]
            out.append(replace(r, summary=with_private(r.summary, private[s])))
    return out
