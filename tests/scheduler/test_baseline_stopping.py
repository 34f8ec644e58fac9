"""The preemptive baselines take a job that is already stopping before they stop another:
its GPUs come back within its grace period anyway (as `default` does)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from builders import make_job, make_node, make_running, make_tenant
from gpuyard.scheduler import ClusterView, PendingCode, Scheduler, SchedulerConfig

NODE = (make_node("n1", gpus=8),)
NOW = 10_000.0  # both running jobs have had 40,000 GPU-seconds: LAS queue 2


def cycle(policy: str, first_terminating: bool):
    running = [
        replace(
            make_running("r1", "t", "n1", 0, 1, 2, 3, terminating=first_terminating),
            oracle_end_at=NOW + 50_000,
        ),
        replace(make_running("r2", "t", "n1", 4, 5, 6, 7), oracle_end_at=NOW + 40_000),
    ]
    head = replace(make_job("j1", 4, tenant="t", submitted_at=NOW - 5), oracle_duration_s=60.0)
    view = ClusterView(NODE, {"t": make_tenant("t", 8)}, tuple(running), (head,), {}, NOW)
    return Scheduler(SchedulerConfig(policy=policy)).cycle(view)


@pytest.mark.parametrize("policy", ["las", "srtf-oracle"])
def test_a_head_waits_for_a_stopping_job_instead_of_stopping_another(policy):
    result = cycle(policy, first_terminating=True)
    assert result.preempt == () and result.admit == ()
    assert result.pending_reasons["j1"].code is PendingCode.WAITING_FOR_PREEMPTION


@pytest.mark.parametrize("policy", ["las", "srtf-oracle"])
def test_without_a_stopping_job_one_victim_is_stopped(policy):
    result = cycle(policy, first_terminating=False)
    assert len(result.preempt) == 1 and result.admit == ()
