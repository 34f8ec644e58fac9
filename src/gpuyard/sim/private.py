"""`fifo-private`: each tenant alone on private nodes of its quota, strict FIFO, no borrowing
(YARN's capacity scheduler with a cluster per team), as one result.

The same runs give each tenant's "private" queueing delay, the yardstick of "worse off than
private" (sim/metrics.py): they are run once and serve both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from gpuyard.sim.engine import SimConfig, SimResult, simulate, with_jitter
from gpuyard.sim.traces import Trace

PRIVATE = "fifo-private"
PRIVATE_RUNS_AS = "fifo-quota"  # alone on its own quota, per-tenant FIFO is strict FIFO


def private_result(trace: Trace, base: SimConfig) -> SimResult:
    """Each tenant's jobs on a cluster of its quota under `fifo-quota` (jittered as `base`
    says, once, before the trace is split), merged. Tenants without a quota are left out."""
    trace = with_jitter(trace, base)
    config = replace(base, policy=PRIVATE_RUNS_AS)
    runs = []
    for tenant in trace.tenants:
        alone = trace.only(tenant)
        if alone.quota_nodes:
            runs.append(simulate(alone, config))
    return merge(trace, replace(base, policy=PRIVATE), runs)


def merge(trace: Trace, config: SimConfig, runs: Sequence[SimResult]) -> SimResult:
    """Separate clusters' results as one cluster's: their jobs, GPUs, allocation added up."""
    jobs = sorted((j for r in runs for j in r.jobs), key=lambda j: (j.trace.submit_s, j.seq))
    gpu_s: dict[str, float] = {}
    for r in runs:
        gpu_s.update(r.tenant_gpu_s)
    return SimResult(
        trace,
        config,
        jobs,
        merged_alloc([r.alloc for r in runs]),
        gpu_s,
        sum(r.capacity for r in runs),
        sum(r.cycles for r in runs),
        sum(r.wall_s for r in runs),
        sum(r.scheduler_s for r in runs),
        sorted(j for r in runs for j in r.unfinished),
        sum(r.quiet_cycles for r in runs),
        sum(r.cpu_s for r in runs),
    )


def merged_alloc(allocs: Sequence[Sequence[tuple[float, int]]]) -> list[tuple[float, int]]:
    """The sum of step functions given as (time, GPUs allocated from then on)."""
    steps: list[tuple[float, int]] = []
    for alloc in allocs:
        before = 0
        for t, gpus in alloc:
            steps.append((t, gpus - before))
            before = gpus
    steps.sort(key=lambda s: s[0])
    out, total = [(0.0, 0)], 0
    for t, change in steps:
        total += change
        if out[-1][0] == t:
            out[-1] = (t, total)
        else:
            out.append((t, total))
    return out
