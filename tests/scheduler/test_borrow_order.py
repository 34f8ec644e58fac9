"""Idle capacity goes to the least-served borrowing head first (`least_served_first`), then by
weighted dominant share; heads within their guarantee always come before borrowers."""

from __future__ import annotations

import pytest

from builders import make_job, make_node, make_running, make_tenant
from gpuyard.scheduler import ClusterView, Scheduler, SchedulerConfig

A, B, LENDER = "a", "b", "lender"
NODE = (make_node("n1", gpus=8),)
HOUR = 3600.0


def cycle(config, tenants, running, queued, now=100.0):
    view = ClusterView(NODE, {t.name: t for t in tenants}, tuple(running), tuple(queued), {}, now)
    return Scheduler(config).cycle(view)


def two_borrowers(least_served_first: bool, b_attained_gpu_s: float):
    """A already borrows 2 GPUs (the larger share); A's and B's heads each borrow 6 of the 6
    free GPUs, so only one starts. B's head has received `b_attained_gpu_s` before."""
    tenants = [make_tenant(A), make_tenant(B), make_tenant(LENDER, 8)]
    running = [make_running("r1", A, "n1", 0, 1, borrowed=2)]
    queued = [
        make_job("j1", 6, tenant=A, submitted_at=50.0),
        make_job("j2", 6, tenant=B, submitted_at=50.0, attained_gpu_s=b_attained_gpu_s),
    ]
    config = SchedulerConfig(least_served_first=least_served_first, tenant_preemption=False)
    return cycle(config, tenants, running, queued)


@pytest.mark.parametrize(
    ("least_served_first", "b_attained_gpu_s", "admitted"),
    [
        (True, 5 * HOUR, "j1"),  # B's head was served 5 GPU-h (LAS queue 1): A's goes first
        (False, 5 * HOUR, "j2"),  # share alone: B borrows nothing yet, so B first
        (True, 0.0, "j2"),  # the same LAS queue: share decides, B first
    ],
)
def test_idle_capacity_goes_to_the_least_served_borrower(least_served_first, b_attained_gpu_s, admitted):
    result = two_borrowers(least_served_first, b_attained_gpu_s)
    assert [p.job_id for p in result.admit] == [admitted]


def test_a_head_within_its_guarantee_still_comes_before_a_less_served_borrower():
    tenants = [make_tenant(A, 6), make_tenant(B)]
    queued = [
        make_job("j1", 6, tenant=A, submitted_at=50.0, attained_gpu_s=50 * HOUR),
        make_job("j2", 6, tenant=B, submitted_at=40.0),
    ]
    result = cycle(SchedulerConfig(tenant_preemption=False), tenants, [], queued)
    assert [p.job_id for p in result.admit] == ["j1"]
