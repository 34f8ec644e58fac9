"""Priority is a tenant's own: a member of one tenant cannot shield its jobs from another
tenant, nor push ahead of it, by giving them a high priority.

Found: a member may give its jobs any priority up to its tenant's maxPriority (issue 19,
item 4), and the scheduler compared priorities across tenants in three places:
- LAS demotion took a borrowing job of another tenant only if it had no higher priority than
  the demoting job: a borrowing job at priority 1000 could never be demoted by another
  tenant's fresh job, so a tenant kept borrowed capacity for as long as it liked;
- the victims' order put the lowest priority first across tenants: when several tenants
  borrow, reclaim and demotion stopped the other tenants' jobs first;
- heads of tenants of equal share were ordered by priority: a tenant with nothing running
  went first on any tie.
Now priorities are compared only between jobs of one tenant; across tenants only the quota
(guaranteed or borrowing) and the LAS queues count (`preempt.candidates`, `Round.order_key`).
"""

from __future__ import annotations

import pytest

from builders import make_job, make_node, make_running, make_tenant
from gpuyard.scheduler import ClusterView, Scheduler, SchedulerConfig

TOP = 1000  # the highest maxPriority a tenant may have


def cycle(nodes, tenants, running, queued, now, config=None):
    view = ClusterView(
        tuple(nodes), {t.name: t for t in tenants}, tuple(running), tuple(queued), {}, now
    )
    return Scheduler(config or SchedulerConfig(aging_s=1e9)).cycle(view)


@pytest.mark.parametrize("priority", [0, TOP])
def test_a_high_priority_borrowing_job_is_demoted_like_any_other(priority):
    # b borrows 4 GPUs with a job that has run 10,000 s on 8 GPUs (the last LAS queue); a's
    # fresh 6-GPU job would borrow too (no reclaim): only demotion makes room for it
    tenants = [make_tenant("a", 4), make_tenant("b", 4)]
    long = make_running("r1", "b", "n1", *range(8), borrowed=4, priority=priority)
    queued = [make_job("j1", 6, tenant="a", submitted_at=9_000.0)]
    result = cycle([make_node("n1", gpus=8)], tenants, [long], queued, now=10_000.0)
    assert [p.job_id for p in result.preempt] == ["r1"]


def test_reclaim_stops_the_cheapest_borrower_whatever_its_priority():
    # b and c each borrow 2 GPUs, both in the first LAS queue; b's job started last. a
    # reclaims 2 GPUs of its guarantee: the newest (b's) goes, though b gave it the highest
    # priority
    tenants = [make_tenant("a", 4), make_tenant("b", 2), make_tenant("c", 2)]
    running = [
        make_running("b0", "b", "n1", 0, 1),
        make_running("b1", "b", "n1", 2, 3, borrowed=2, priority=TOP, started_at=9_900.0),
        make_running("c0", "c", "n2", 0, 1),
        make_running("c1", "c", "n2", 2, 3, borrowed=2, started_at=9_000.0),
    ]
    queued = [make_job("j1", 2, tenant="a", submitted_at=9_950.0)]
    nodes = [make_node("n1", gpus=4), make_node("n2", gpus=4)]
    result = cycle(nodes, tenants, running, queued, now=10_000.0)
    assert [p.job_id for p in result.preempt] == ["b1"]


def test_a_tenant_goes_first_on_a_tie_by_age_not_by_priority():
    tenants = [make_tenant("a"), make_tenant("b")]
    queued = [make_job("a1", 4, tenant="a"), make_job("b2", 4, tenant="b", priority=TOP)]
    result = cycle([make_node("n1", gpus=4)], tenants, [], queued, now=100.0)
    assert [p.job_id for p in result.admit] == ["a1"]
