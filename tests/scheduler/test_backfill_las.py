"""The opt-in policies of `default`: backfill behind a blocked head, LAS demotion."""

from __future__ import annotations

from dataclasses import replace

from builders import make_job, make_node, make_running, make_tenant
from gpuyard.model import QueuePolicy
from gpuyard.scheduler import ClusterView, PendingCode, Scheduler, SchedulerConfig

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
