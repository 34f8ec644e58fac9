"""Trial preemption (`preempt.py`): the jobs the removal loop would take, worked out without
touching the state, match what the loop does; a search that cannot succeed leaves the
snapshot and the books as they were; the candidates' order, where priority counts only
inside a tenant."""

from __future__ import annotations

import pytest

from builders import make_job, make_node, make_running, make_tenant
from gpuyard.model import QueuePolicy
from gpuyard.scheduler.packing import place_gang
from gpuyard.scheduler.preempt import candidates, demotion, find_victims, removable
from gpuyard.scheduler.state import ClusterState

FLAVOR = "A100-80GB"


def state_with(running, nodes=None, tenants=None) -> ClusterState:
    s = ClusterState()
    s.sync(
        nodes or [make_node("n1", gpus=4), make_node("n2", gpus=4)],
        tenants or {"a": make_tenant("a", gpus=4), "b": make_tenant("b", gpus=4)},
        running,
    )
    return s


def books(s: ClusterState):
    free = {n: sorted(nf.free_gpus) for n, nf in s.snapshot.nodes.items()}
    return free, {t: dict(u) for t, u in s.book.used.items()}, sorted(s.charged)


def fits_for(s: ClusterState, job):
    return lambda: place_gang(s.snapshot, job, FLAVOR)


def b_borrows_two_of_six():
    """b is guaranteed 4 and uses 6: three opportunistic 1-GPU jobs on n1, 3 GPUs on n2."""
    return [
        make_running("b1", "b", "n1", 0, borrowed=1),
        make_running("b2", "b", "n1", 1, borrowed=1),
        make_running("b3", "b", "n1", 2, borrowed=1),
        make_running("b4", "b", "n2", 0, 1, 2),
    ]


def test_a_tenant_stops_being_a_victim_once_it_no_longer_borrows():
    # only 2 of b's GPUs are borrowed: once b1 and b2 are removed, b3 is within its guarantee
    running = b_borrows_two_of_six()
    s = state_with(running)
    head = make_job("a1", gpus=3, tenant="a")
    assert [r.job_id for r in removable(s, head, running[:3])] == ["b1", "b2"]


def test_jobs_already_gone_and_those_not_borrowing_are_not_removable():
    running = [
        make_running("b1", "b", "n1", 0, 1, 2, 3),  # within b's guarantee
        make_running("a2", "a", "n2", 0),  # the head's own tenant: the caller chose it
    ]
    s = state_with(running)
    gone = make_running("b9", "b", "n2", 3, borrowed=1)
    head = make_job("a1", gpus=4, tenant="a")
    assert [r.job_id for r in removable(s, head, [running[0], gone, running[1]])] == ["a2"]


def test_a_search_that_cannot_free_enough_gives_up_and_leaves_everything_as_it_was():
    running = b_borrows_two_of_six()
    s = state_with(running)
    before = books(s)
    head = make_job("a1", gpus=4, tenant="a")  # needs a whole node: n1 keeps b3
    assert find_victims(s, head, FLAVOR, running[:3], fits_for(s, head)) is None
    assert books(s) == before


def test_the_victims_found_are_the_removable_prefix_that_makes_room():
    running = [
        make_running("b1", "b", "n1", 0, borrowed=1),
        make_running("b2", "b", "n1", 1, borrowed=1),
        make_running("b4", "b", "n2", 0, 1, 2),
    ]
    s = state_with(running)
    before = books(s)
    head = make_job("a1", gpus=3, tenant="a")
    found = find_victims(s, head, FLAVOR, running[:2], fits_for(s, head))
    assert found is not None
    victims, placement = found
    assert [v.job_id for v in victims] == ["b1"]  # n1 has 2 free: one more makes 3
    assert placement.tasks[0].node == "n1"
    assert books(s) == before


def victims_order(running, head, tenants):
    rows = [
        (r, r.tenant, r.priority, r.opportunistic, r.terminating, r.started_at, r.gpus, 0.0)
        for r in running
    ]
    demote = demotion(head, (3_600.0, 36_000.0), own_tenant=True)
    return [r.job_id for r in candidates(head, rows, tenants, True, 10_000.0, demote)]


LAS_TENANTS = {
    "a": make_tenant("a", 4, queue_policy=QueuePolicy.LAS),
    "b": make_tenant("b", 2),
    "c": make_tenant("c", 2),
}


@pytest.mark.parametrize(
    ("running", "want"),
    [
        (  # across tenants: most served first, newest there; priorities do not count
            [
                make_running("b1", "b", "n1", 0, borrowed=1, priority=9, started_at=9_000.0),
                make_running("c1", "c", "n1", 1, borrowed=1, started_at=8_000.0),
            ],
            ["b1", "c1"],
        ),
        (  # inside b: its lower priority takes b's first place, whatever its start
            [
                make_running("b1", "b", "n1", 0, borrowed=1, priority=9, started_at=9_000.0),
                make_running("c1", "c", "n1", 1, borrowed=1, started_at=8_000.0),
                make_running("b2", "b", "n1", 2, borrowed=1, priority=1, started_at=7_000.0),
            ],
            ["b2", "c1", "b1"],
        ),
        (  # the head's own tenant: only jobs of no higher priority are demoted
            [
                make_running("a1", "a", "n1", 0, 1, priority=5, started_at=0.0),
                make_running("a2", "a", "n1", 2, 3, priority=2, started_at=0.0),
                make_running("b1", "b", "n1", 4, borrowed=1, priority=9, started_at=0.0),
            ],
            ["a2", "b1"],
        ),
        (  # terminating jobs first, whatever the tenant or priority
            [
                make_running("b1", "b", "n1", 0, borrowed=1, started_at=9_000.0),
                make_running("c1", "c", "n1", 1, borrowed=1, priority=7, terminating=True),
            ],
            ["c1", "b1"],
        ),
    ],
    ids=["across-tenants", "inside-a-tenant", "own-tenant-no-higher", "terminating-first"],
)
def test_priority_orders_victims_only_inside_their_tenant(running, want):
    head = make_job("j1", 1, tenant="a", priority=2)
    assert victims_order(running, head, LAS_TENANTS) == want
