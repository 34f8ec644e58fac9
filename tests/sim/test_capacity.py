"""No policy ever runs more GPUs than the cluster has: a preempted job keeps its GPUs until
it stops, so the room freed for the job it was stopped for is not handed to anyone else in
the meantime, and a GPU named by two tasks (a stopping victim and the job held in its place)
is free only once both have left (`ClusterSnapshot` counts the holders of each GPU)."""

from __future__ import annotations

import pytest
from test_sim import random_trace

from gpuyard.model import QueuePolicy
from gpuyard.sim import SimConfig
from gpuyard.sim.engine import simulate

CONFIGS = [
    SimConfig(policy="srtf-oracle"),
    SimConfig(policy="las"),
    SimConfig(policy="las", checkpoint_s=300),
    SimConfig(policy="default"),
    SimConfig(policy="default", tenant_queue=QueuePolicy.LAS),
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c.policy}-{c.tenant_queue}")
@pytest.mark.parametrize("seed", [3, 6])
def test_preemptive_policies_never_allocate_more_gpus_than_exist(config, seed):
    result = simulate(random_trace(seed, n=400), config)
    assert sum(j.preemptions for j in result.jobs) > 0  # the case that matters happened
    assert max(gpus for _, gpus in result.alloc) <= result.capacity
    assert not result.unfinished
