"""The opt-in policies of `default`: backfill behind a blocked head, LAS demotion."""

from __future__ import annotations

from dataclasses import replace

import pytest

from builders import make_job, make_node, make_running, make_tenant
from gpuyard.model import QueuePolicy
from gpuyard.scheduler import ClusterView, PendingCode, Scheduler, SchedulerConfig
from gpuyard.scheduler.order import is_aged

A, B = "a", "b"
NODE = (make_node("n1", gpus=8),)


def cycle(config, tenants, running, queued, now=100.0):
    view = ClusterView(NODE, {t.name: t for t in tenants}, tuple(running), tuple(queued), {}, now)
    return Scheduler(config).cycle(view)


def blocked_head_case(now: float, backfill: bool):
    running = [make_running("r1", A, "n1", *range(6))]
    queued = [make_job("j1", 4, tenant=A), make_job("j2", 2, tenant=A)]
    return cycle(
        SchedulerConfig(tenant_backfill=backfill), [make_tenant(A, 8)], running, queued, now
    )


def test_without_backfill_a_blocked_head_blocks_its_tenant():
    result = blocked_head_case(100.0, backfill=False)
    assert not result.admit
    assert result.pending_reasons["j2"].code is PendingCode.BEHIND


def test_backfill_starts_a_later_job_that_fits_now():
    result = blocked_head_case(100.0, backfill=True)
    assert [p.job_id for p in result.admit] == ["j2"]
    assert result.pending_reasons["j1"].code is PendingCode.INSUFFICIENT


def test_no_backfill_behind_an_aged_head():
    result = blocked_head_case(1.0 + 3600.0, backfill=True)
    assert not result.admit


@pytest.mark.parametrize(
    ("candidate", "free", "started", "its_reason"),
    [
        pytest.param(make_job("j2", 3, tenant=A), 2, [], PendingCode.BEHIND, id="no-room"),
        pytest.param(make_job("j2", 2, tenant=A), 2, ["j2"], None, id="room"),
        pytest.param(make_job("j2", 0, tenant=A), 0, ["j2"], None, id="cpu-only"),
    ],
)
def test_backfill_is_not_looked_for_where_no_node_has_room(candidate, free, started, its_reason):
    # the scan stops when no node has as many GPUs free as the tenant's narrowest job needs
    # (it would not fit): the jobs behind then wait for the head, as those past the window do
    running = [make_running("r1", A, "n1", *range(8 - free))]
    queued = [make_job("j1", 4, tenant=A), candidate]
    result = cycle(SchedulerConfig(tenant_backfill=True), [make_tenant(A, 8)], running, queued)
    assert [p.job_id for p in result.admit] == started
    if its_reason is not None:
        assert result.pending_reasons["j2"].code is its_reason


def las_case(preemption: bool, victim_tenant: str = A, borrowed: int = 0):
    tenants = [
        make_tenant(A, 4, queue_policy=QueuePolicy.LAS),
        make_tenant(B, 4, queue_policy=QueuePolicy.LAS),
    ]
    long = replace(make_running("r1", victim_tenant, "n1", *range(8), borrowed=borrowed))
    queued = [make_job("j1", 2, tenant=A, submitted_at=9_000.0)]
    config = SchedulerConfig(tenant_preemption=preemption, aging_s=1e9)
    # r1 has run 10,000 s on 8 GPUs: LAS queue 2; j1 has received nothing: queue 0
    return cycle(config, tenants, [long], queued, now=10_000.0)


def test_las_demotion_preempts_an_own_job_with_more_service():
    assert not las_case(False).preempt
    result = las_case(True)
    assert [p.job_id for p in result.preempt] == ["r1"]
    assert "LAS demotion" in result.preempt[0].reason
    assert result.pending_reasons["j1"].code is PendingCode.WAITING_FOR_PREEMPTION


def test_las_demotion_never_touches_a_guaranteed_job_of_another_tenant():
    tenants = [make_tenant(A, 0, queue_policy=QueuePolicy.LAS), make_tenant(B, 8)]
    running = [make_running("r1", B, "n1", *range(8))]
    queued = [make_job("j1", 2, tenant=A, submitted_at=9_000.0)]
    config = SchedulerConfig(tenant_preemption=True, aging_s=1e9)
    assert not cycle(config, tenants, running, queued, now=10_000.0).preempt


def borrowed_long_case(config: SchedulerConfig, started_at: float = 0.0, borrowed: int = 4):
    """Tenant b (guarantee 4, fifo) runs a long 8-GPU job, `borrowed` of them beyond its
    guarantee; tenant a (guarantee 4, fifo) queues a fresh job of 6 GPUs, more than its
    guarantee, so it may not reclaim — only LAS demotion can make room for it."""
    tenants = [make_tenant(A, 4), make_tenant(B, 4)]
    long = make_running("r1", B, "n1", *range(8), borrowed=borrowed, started_at=started_at)
    queued = [make_job("j1", 6, tenant=A, submitted_at=9_000.0)]
    return cycle(replace(config, aging_s=1e9), tenants, [long], queued, now=10_000.0)


def test_demotion_of_opportunistic_jobs_serves_fifo_tenants_too():
    # j1 would borrow 2 GPUs: no reclaim; r1 has run 80,000 GPU-s (LAS queue 2), j1 none
    assert not borrowed_long_case(SchedulerConfig(tenant_preemption=False)).preempt
    result = borrowed_long_case(SchedulerConfig(tenant_preemption=True))
    assert [p.job_id for p in result.preempt] == ["r1"]
    assert "LAS demotion" in result.preempt[0].reason


def test_demotion_spares_a_guaranteed_job_and_a_job_within_its_quantum():
    on = SchedulerConfig(tenant_preemption=True, demotion_min_run_s=1800.0)
    assert not borrowed_long_case(on, borrowed=0).preempt  # r1 is not opportunistic
    assert not borrowed_long_case(on, started_at=9_000.0).preempt  # ran 1,000 s < 1,800 s
    assert [p.job_id for p in borrowed_long_case(on, started_at=8_000.0).preempt] == ["r1"]


@pytest.mark.parametrize(
    ("attained_gpu_s", "per_run", "waited_s", "aged"),
    [
        (0.0, 0.0, 3_600.0, True),  # aging_s alone
        (0.0, 2.0, 3_600.0, True),  # never ran: aging_s
        (8_000.0, 0.0, 3_600.0, True),  # starvation limit off
        (8_000.0, 2.0, 3_600.0, False),  # ran 4,000 s on 2 GPUs: waits 8,000 s
        (8_000.0, 2.0, 8_000.0, True),
    ],
)
def test_a_job_that_ran_ages_after_its_starvation_limit(attained_gpu_s, per_run, waited_s, aged):
    job = make_job("j1", 2, submitted_at=1_000.0, attained_gpu_s=attained_gpu_s)
    config = SchedulerConfig(aging_per_run_s=per_run)
    assert is_aged(job, 1_000.0 + waited_s, config) is aged


@pytest.mark.parametrize(("most_served_first", "victim"), [(False, "young"), (True, "old")])
def test_demotion_victim_order(most_served_first, victim):
    # old: 40,000 GPU-s (LAS queue 2); young: 4,000 GPU-s (queue 1), less progress to lose
    running = [
        make_running("old", A, "n1", 0, 1, 2, 3, started_at=0.0),
        make_running("young", A, "n1", 4, 5, 6, 7, started_at=9_000.0),
    ]
    config = SchedulerConfig(aging_s=1e9, demote_most_served_first=most_served_first)
    tenants = [make_tenant(A, 8, queue_policy=QueuePolicy.LAS)]
    queued = [make_job("j1", 4, tenant=A, submitted_at=9_500.0)]
    result = cycle(config, tenants, running, queued, now=10_000.0)
    assert [p.job_id for p in result.preempt] == [victim]
