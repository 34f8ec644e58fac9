"""The policies of `default` inside and across tenants: backfill behind a blocked head
(promoted or not, by fitting or by demotion), LAS demotion and its victims' order, and
promotion of a job that waited past its limit (issue 16)."""

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


def blocked_head_case(now: float, backfill: bool, preemption: bool = False):
    running = [make_running("r1", A, "n1", *range(6))]
    queued = [make_job("j1", 4, tenant=A), make_job("j2", 2, tenant=A)]
    config = SchedulerConfig(tenant_backfill=backfill, tenant_preemption=preemption)
    return cycle(config, [make_tenant(A, 8)], running, queued, now)


def test_without_backfill_a_blocked_head_blocks_its_tenant():
    result = blocked_head_case(100.0, backfill=False)
    assert not result.admit
    assert result.pending_reasons["j2"].code is PendingCode.BEHIND


def test_backfill_starts_a_later_job_that_fits_now():
    result = blocked_head_case(100.0, backfill=True)
    assert [p.job_id for p in result.admit] == ["j2"]
    assert result.pending_reasons["j1"].code is PendingCode.INSUFFICIENT


PROMOTED_AT = 1.0 + SchedulerConfig().aging_s  # j1 (submitted at 1.0) is promoted then


def test_backfill_goes_on_behind_a_promoted_head():
    # before issue 16 an aged head stopped its tenant's backfill: at high load every head
    # was aged and `default` became strict FIFO
    result = blocked_head_case(PROMOTED_AT, backfill=True)
    assert [p.job_id for p in result.admit] == ["j2"]


def test_a_promoted_head_demotes_as_a_job_of_the_first_queue():
    # r1 (6 GPUs since 0) is in the last LAS queue; j1 has not run: queue 0 either way, but
    # only once promoted does it come first and reach r1 before j2 starts
    result = blocked_head_case(PROMOTED_AT, backfill=True, preemption=True)
    assert [p.job_id for p in result.preempt] == ["r1"]
    assert result.pending_reasons["j1"].code is PendingCode.WAITING_FOR_PREEMPTION


def test_a_promoted_job_that_ran_demotes_jobs_of_its_own_queue_and_above():
    # j1 ran 40,000 GPU-s before (LAS queue 2 of (3,600, 36,000)): it demotes nobody until
    # promoted, then r1 (queue 2 too) is a victim
    tenants = [make_tenant(A, 8, queue_policy=QueuePolicy.LAS)]
    running = [make_running("r1", A, "n1", *range(8), started_at=0.0)]
    config = SchedulerConfig(
        aging_s=3_600.0, aging_per_run_s=0.0, las_thresholds_gpu_s=(3_600.0, 36_000.0)
    )
    job = make_job("j1", 4, tenant=A, submitted_at=9_000.0, attained_gpu_s=40_000.0)
    assert not cycle(config, tenants, running, [job], now=10_000.0).preempt
    later = cycle(config, tenants, running, [job], now=9_000.0 + 3_600.0)
    assert [p.job_id for p in later.preempt] == ["r1"]


def test_a_backfill_candidate_makes_room_by_demotion():
    # j1 (16 GPUs) can never fit on one 8-GPU node; j2 (4 GPUs, queue 0) may demote r1
    tenants = [make_tenant(A, 8, queue_policy=QueuePolicy.LAS)]
    running = [make_running("r1", A, "n1", *range(8), started_at=0.0)]
    two = (make_node("n1", gpus=8), make_node("n2", gpus=8))
    busy = [make_running("r2", A, "n2", *range(8), started_at=9_999.0)]
    queued = [make_job("j1", 16, tenant=A, tasks=2), make_job("j2", 4, tenant=A)]
    config = SchedulerConfig(aging_s=1e9)
    view = ClusterView(two, {A: tenants[0]}, tuple(running + busy), tuple(queued), {}, 10_000.0)
    result = Scheduler(config).cycle(view)
    assert [(p.job_id, p.for_job_id) for p in result.preempt] == [("r1", "j2")]


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


def test_demotion_spares_a_guaranteed_job_of_another_tenant():
    on = SchedulerConfig(tenant_preemption=True)
    assert not borrowed_long_case(on, borrowed=0).preempt  # r1 is not opportunistic
    assert [p.job_id for p in borrowed_long_case(on).preempt] == ["r1"]


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
    config = SchedulerConfig(aging_s=3_600.0, aging_per_run_s=per_run)
    assert is_aged(job, 1_000.0 + waited_s, config) is aged


@pytest.mark.parametrize(
    ("young_started_at", "victim"),
    [(9_000.0, "old"), (1_000.0, "young")],
    ids=["highest-queue-first", "newest-first-in-one-queue"],
)
def test_demotion_victim_order(young_started_at, victim):
    # old: 4 GPUs since 0, 40,000 GPU-s (LAS queue 2); young: 4 GPUs since 9,000 (4,000
    # GPU-s: queue 1) or since 1,000 (36,000: queue 2 too, and the newer one there)
    running = [
        make_running("old", A, "n1", 0, 1, 2, 3, started_at=0.0),
        make_running("young", A, "n1", 4, 5, 6, 7, started_at=young_started_at),
    ]
    config = SchedulerConfig(aging_s=1e9, las_thresholds_gpu_s=(3_600.0, 36_000.0))
    tenants = [make_tenant(A, 8, queue_policy=QueuePolicy.LAS)]
    queued = [make_job("j1", 4, tenant=A, submitted_at=9_500.0)]
    result = cycle(config, tenants, running, queued, now=10_000.0)
    assert [p.job_id for p in result.preempt] == [victim]
