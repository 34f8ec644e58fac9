"""EASY backfill for a promoted job (issue 16): once it has waited past its limit and still
cannot start, jobs behind it start only if they are expected to end before it can, or leave
it the room; with no run times known, nothing is reserved and backfill goes on."""

from __future__ import annotations

from dataclasses import replace

import pytest

from builders import make_job, make_node, make_running, make_tenant
from gpuyard.scheduler import ClusterView, PendingCode, Scheduler, SchedulerConfig

A = "a"
NOW = 100_000.0
CONFIG = SchedulerConfig(aging_s=3_600.0, tenant_preemption=False)


def job(job_id: str, gpus: int, submitted_at: float, runtime_s: float | None):
    return replace(
        make_job(job_id, gpus, tenant=A, submitted_at=submitted_at), expected_runtime_s=runtime_s
    )


def view(r1_runtime: int | None, queued):
    # r1 holds 6 of the 8 GPUs and ends (by maxRuntime) 600 s from now, if it has one
    r1 = make_running("r1", A, "n1", *range(6), started_at=NOW - 100, max_runtime_s=r1_runtime)
    nodes = (make_node("n1", gpus=8),)
    return ClusterView(nodes, {A: make_tenant(A, 8)}, (r1,), tuple(queued), {}, NOW)


PROMOTED = job("j1", 8, NOW - 7_200, None)  # waited 2 h > 1 h: promoted, needs the node


@pytest.mark.parametrize(
    ("runtime_s", "starts"),
    [(300.0, True), (3_000.0, False), (None, False)],
    ids=["ends-before-it", "ends-after-it", "no-estimate"],
)
def test_behind_a_promoted_head_only_jobs_that_end_in_time_start(runtime_s, starts):
    candidate = job("j2", 2, NOW - 60, runtime_s)
    result = Scheduler(CONFIG).cycle(view(700, [PROMOTED, candidate]))
    assert [p.job_id for p in result.admit] == (["j2"] if starts else [])
    if not starts:
        reason = result.pending_reasons["j2"]
        assert reason.code is PendingCode.BEHIND and "would delay job j1" in reason.message


def test_without_run_times_nothing_is_reserved():
    # r1 has no maxRuntime and no history: j1's start cannot be estimated, backfill goes on
    candidate = job("j2", 2, NOW - 60, None)
    result = Scheduler(CONFIG).cycle(view(None, [PROMOTED, candidate]))
    assert [p.job_id for p in result.admit] == ["j2"]


def test_an_unpromoted_head_reserves_nothing():
    young = job("j1", 8, NOW - 60, None)
    candidate = job("j2", 2, NOW - 30, 3_000.0)
    result = Scheduler(CONFIG).cycle(view(700, [young, candidate]))
    assert [p.job_id for p in result.admit] == ["j2"]


def test_a_parked_promoted_head_keeps_its_reservation():
    scheduler = Scheduler(CONFIG)
    first = scheduler.cycle(view(700, [PROMOTED]))
    assert not first.admit  # j1 parked: nothing is released until r1 ends
    late = job("j3", 2, NOW - 10, 3_000.0)
    again = scheduler.cycle(replace(view(700, [PROMOTED, late]), now=NOW + 1))
    assert not again.admit
    assert "would delay job j1" in again.pending_reasons["j3"].message
