"""Replay speed: periodic cycles that the policy says cannot decide anything are skipped
(`quiet_until`; for `default`, while every head is parked, until a job ages) with exactly
the same results, and SRTF keeps its victims sorted across
cycles (`RemainingPool`) in the order a full sort of the running jobs gives."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from test_sim import random_trace

from builders import make_running
from gpuyard.model import QueuePolicy
from gpuyard.scheduler import ClusterView, SchedulerConfig
from gpuyard.scheduler.baselines import Las
from gpuyard.scheduler.remaining import RemainingPool
from gpuyard.scheduler.view import ViewChanges
from gpuyard.sim import SimConfig
from gpuyard.sim.engine import simulate

CONFIGS = [
    SimConfig(policy="fifo"),
    SimConfig(policy="fifo-backfill"),
    SimConfig(policy="sjf-oracle"),
    SimConfig(policy="srtf-oracle"),
    SimConfig(policy="las"),
    SimConfig(policy="las", checkpoint_s=300),
    SimConfig(policy="default"),
    SimConfig(policy="default", checkpoint_s=300, least_served_first=False),
    SimConfig(policy="default", tenant_queue=QueuePolicy.LAS, tenant_preemption=True),
    SimConfig(policy="default", tenant_backfill=False, aging_s=600.0),
    SimConfig(policy="default", tenant_queue=QueuePolicy.FIFO),
    SimConfig(policy="default", aging_s=1200.0, checkpoint_s=300),  # promotions, demotions
]


def waiting_trace(seed: int, n: int = 300):
    """Long jobs on a loaded cluster: queues that stay blocked for hours between events."""
    return random_trace(
        seed,
        n,
        mean_gap_s=600.0,
        durations_s=(600.0, 40000.0),
        gpus=(1, 1, 2, 4, 8, 16),
        quotas="demand:0.9",
    )


def outcome(result):
    jobs = [(j.first_start, j.end, j.preemptions, j.lost_gpu_s, j.placement) for j in result.jobs]
    return jobs, result.alloc, result.tenant_gpu_s


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c.policy}-{c.checkpoint_s:g}")
def test_skipping_quiet_cycles_changes_no_result(config):
    assert config.skip_quiet  # on by default
    skipped = 0
    for trace in (random_trace(6, n=400), waiting_trace(3)):
        every = simulate(trace, replace(config, skip_quiet=False))
        skips = simulate(trace, config)
        assert outcome(skips) == outcome(every)
        assert skips.cycles + skips.quiet_cycles == every.cycles and every.quiet_cycles == 0
        skipped += skips.quiet_cycles
    assert skipped > 0


def running(job_id, end, *, gpu=0, terminating=False, preemptible=True):
    r = make_running(job_id, "a", "n0", gpu, terminating=terminating)
    return replace(r, oracle_end_at=end, preemptible=preemptible)


def test_remaining_pool_orders_by_time_left_then_running_order():
    jobs = [
        running("r1", 500.0),
        running("r2", None),
        running("r3", 900.0),
        running("r4", 500.0),
        running("r5", 2000.0, terminating=True),
        running("r6", 3000.0, preemptible=False),
    ]
    pool = RemainingPool()
    pool.sync(jobs, None, 0.0)
    assert [r.job_id for r in pool.longer_than(-math.inf, 100.0)] == ["r2", "r3", "r1", "r4"]
    assert [r.job_id for r in pool.longer_than(399.0, 100.0)] == ["r2", "r3", "r1", "r4"]
    assert [r.job_id for r in pool.longer_than(400.0, 100.0)] == ["r2", "r3"]
    assert [r.job_id for r in pool.longer_than(799.0, 100.0)] == ["r2", "r3"]
    assert [r.job_id for r in pool.longer_than(800.0, 100.0)] == ["r2"]


@pytest.mark.parametrize(
    "stopped, started, expect",
    [
        ({"r3"}, (), ["r2", "r1", "r4"]),
        ((), (running("r3", 900.0, terminating=True),), ["r2", "r1", "r4"]),
        ({"r1"}, (running("r7", 500.0),), ["r2", "r3", "r4", "r7"]),
        ({"r2"}, (running("r2", 100.0),), ["r3", "r1", "r4", "r2"]),
    ],
)
def test_remaining_pool_follows_the_changes_as_a_rebuild_does(stopped, started, expect):
    before = [running("r1", 500.0), running("r2", None), running("r3", 900.0)]
    before.append(running("r4", 500.0))
    pool = RemainingPool()
    pool.sync(before, None, 0.0)
    now = {r.job_id: r for r in before if r.job_id not in stopped}
    now.update({r.job_id: r for r in started})
    pool.sync(
        list(now.values()), ViewChanges(1, stopped=frozenset(stopped), started=started), 0.0
    )
    rebuilt = RemainingPool()
    rebuilt.sync(list(now.values()), None, 0.0)
    assert [r.job_id for r in pool.longer_than(-math.inf, 0.0)] == expect
    assert [r.job_id for r in rebuilt.longer_than(-math.inf, 0.0)] == expect


def test_remaining_pool_rebuilds_when_changes_do_not_add_up():
    pool = RemainingPool()
    pool.sync([running("r1", 500.0)], None, 0.0)
    pool.sync([running("r1", 500.0), running("r2", 900.0)], ViewChanges(1), 0.0)
    assert [r.job_id for r in pool.longer_than(0.0, 0.0)] == ["r2", "r1"]


@pytest.mark.parametrize(
    "attained, gpus, started_at, now, expect",
    [
        (0.0, 1, 0.0, 10.0, 100.0),  # reaches 100 GPU-s at t=100
        (0.0, 2, 0.0, 10.0, 50.0),  # two GPUs: twice as fast
        (0.0, 1, 0.0, 100.0, 1000.0),  # at the first threshold: the next one
        (150.0, 1, 20.0, 30.0, 870.0),  # carried service counts
        (5000.0, 1, 0.0, 10.0, math.inf),  # past the last threshold: never moves
    ],
)
def test_las_is_quiet_until_a_running_job_moves_up_a_queue(
    attained, gpus, started_at, now, expect
):
    las = Las(SchedulerConfig(policy="las", las_thresholds_gpu_s=(100.0, 1000.0)))
    r = make_running("r", "a", "n0", *range(gpus), started_at=started_at)
    r = replace(r, attained_gpu_s=attained)
    stopping = make_running("s", "a", "n0", 7, terminating=True)  # no victim: ignored
    view = ClusterView(nodes=(), running=(r, stopping), now=now)
    las.sync_running(view, None)
    assert las.quiet_until(view) == expect
    gone = replace(view, running=(stopping,), now=now + 1)
    las.sync_running(gone, ViewChanges(0, stopped=frozenset({"r"})))
    assert las.quiet_until(gone) == math.inf  # its crossings left with it
