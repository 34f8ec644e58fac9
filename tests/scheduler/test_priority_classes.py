"""Priority classes (HiveD's prod > test > oppo): `prod` before `normal` inside a tenant,
`opportunistic` on idle capacity only (never within a guarantee, started only where nobody
else waits, after every other head) and preempted first, by any other job of any tenant."""

from __future__ import annotations

import pytest

from builders import make_job, make_node, make_running, make_tenant
from gpuyard.model import PriorityClass
from gpuyard.scheduler import ClusterView, PendingCode, Scheduler, SchedulerConfig
from gpuyard.scheduler.order import is_aged

OPPO, PROD = PriorityClass.OPPORTUNISTIC, PriorityClass.PROD
A, B, C = "a", "b", "c"
N4, N8 = [make_node("n1", gpus=4)], [make_node("n1", gpus=8)]


def cycle(nodes, tenants, running, queued, now=100.0):
    view = ClusterView(
        tuple(nodes), {t.name: t for t in tenants}, tuple(running), tuple(queued), {}, now
    )
    return Scheduler(SchedulerConfig(aging_s=1e9)).cycle(view)


CASES = [
    # (id, nodes, tenants, running, queued, admitted, opportunistic, preempted)
    (
        "oppo-borrows-even-within-the-guarantee",
        N8,
        [make_tenant(A, 8)],
        [],
        [make_job("j1", 4, tenant=A, priority_class=OPPO)],
        ["j1"],
        ["j1"],
        [],
    ),
    (
        "oppo-is-not-charged-to-the-guarantee",  # a's normal job is still guaranteed
        N8,
        [make_tenant(A, 4)],
        [make_running("r1", A, "n1", 0, 1, 2, 3, borrowed=4, priority_class=OPPO)],
        [make_job("j1", 4, tenant=A)],
        ["j1"],
        [],
        [],
    ),
    (
        "oppo-heads-after-every-other-head",  # j1 is older, but b's normal job goes first
        N4,
        [make_tenant(A), make_tenant(B)],
        [],
        [make_job("j1", 4, tenant=A, priority_class=OPPO), make_job("j2", 4, tenant=B)],
        ["j2"],
        ["j2"],
        [],
    ),
    (
        "oppo-last-inside-its-tenant",
        N4,
        [make_tenant(A, 4)],
        [],
        [make_job("j1", 4, tenant=A, priority_class=OPPO), make_job("j2", 4, tenant=A)],
        ["j2"],
        [],
        [],
    ),
    (
        "oppo-not-where-another-job-waits",  # c's j1 waits for A100s: j2 may not take them
        N8,
        [make_tenant(A), make_tenant(B, 8), make_tenant(C)],
        [make_running("r1", B, "n1", *range(6))],
        [make_job("j1", 4, tenant=C), make_job("j2", 2, tenant=A, priority_class=OPPO)],
        [],
        [],
        [],
    ),
    (
        "oppo-preempted-first-across-tenants",  # r2 is the most served, yet r1 goes
        N8,
        [make_tenant(A), make_tenant(B, 2), make_tenant(C)],
        [
            make_running("r1", A, "n1", 0, 1, 2, 3, borrowed=4, priority_class=OPPO,
                         started_at=90.0),
            make_running("r2", B, "n1", 4, 5, 6, 7, borrowed=2, started_at=-40_000.0),
        ],  # fmt: skip
        [make_job("j1", 4, tenant=C)],
        [],
        [],
        ["r1"],
    ),
    (
        "oppo-preempted-by-its-own-tenant",  # no priority preemption needed
        N8,
        [make_tenant(A, 8)],
        [make_running("r1", A, "n1", *range(8), borrowed=8, priority_class=OPPO)],
        [make_job("j1", 4, tenant=A)],
        [],
        [],
        ["r1"],
    ),
    (
        "oppo-stops-nobody",  # r1 is far more served, and borrows: j1 could demote it
        N8,
        [make_tenant(A), make_tenant(B, 4)],
        [make_running("r1", B, "n1", *range(8), borrowed=4, started_at=-40_000.0)],
        [make_job("j1", 4, tenant=A, priority_class=OPPO)],
        [],
        [],
        [],
    ),
    (
        "prod-before-any-priority-in-its-tenant",
        N4,
        [make_tenant(A, 4)],
        [],
        [make_job("j1", 4, tenant=A, priority=1000), make_job("j2", 4, tenant=A, priority_class=PROD)],
        ["j2"],
        [],
        [],
    ),  # fmt: skip
    (
        "prod-preempts-normal-with-priority-preemption",
        N4,
        [make_tenant(A, 4, priority_preemption=True)],
        [make_running("r1", A, "n1", 0, 1, 2, 3, priority=1000)],
        [make_job("j1", 4, tenant=A, priority_class=PROD)],
        [],
        [],
        ["r1"],
    ),
    (
        "prod-preempts-nothing-without-it",
        N4,
        [make_tenant(A, 4)],
        [make_running("r1", A, "n1", 0, 1, 2, 3)],
        [make_job("j1", 4, tenant=A, priority_class=PROD)],
        [],
        [],
        [],
    ),
    (
        "prod-is-nothing-to-another-tenant",  # b's borrower, not more served: kept
        N4,
        [make_tenant(A, priority_preemption=True), make_tenant(B)],
        [make_running("r1", B, "n1", 0, 1, 2, 3, borrowed=4)],
        [make_job("j1", 4, tenant=A, priority_class=PROD)],
        [],
        [],
        [],
    ),
]


@pytest.mark.parametrize(
    ("nodes", "tenants", "running", "queued", "admitted", "opportunistic", "preempted"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_priority_classes(nodes, tenants, running, queued, admitted, opportunistic, preempted):
    result = cycle(nodes, tenants, running, queued)
    assert [p.job_id for p in result.admit] == admitted
    assert sorted(a.job_id for a in result.admissions if a.opportunistic) == opportunistic
    assert [p.job_id for p in result.preempt] == preempted


def test_an_opportunistic_job_says_who_waits_for_the_capacity():
    _, nodes, tenants, running, queued, *_ = CASES[4]
    reason = cycle(nodes, tenants, running, queued).pending_reasons["j2"]
    assert reason.code is PendingCode.INSUFFICIENT
    assert "idle capacity only, and job j1 waits for A100-80GB GPUs" in reason.message


def test_a_preempted_opportunistic_job_is_told_why():
    _, nodes, tenants, running, queued, *_ = CASES[5]
    (p,) = cycle(nodes, tenants, running, queued).preempt
    assert "opportunistic job runs on idle capacity only" in p.reason


def test_an_opportunistic_job_is_never_promoted():
    config = SchedulerConfig(aging_s=10.0)
    assert is_aged(make_job("j1", submitted_at=0.0), 100.0, config)
    assert not is_aged(make_job("j1", submitted_at=0.0, priority_class=OPPO), 100.0, config)


def test_a_parked_head_still_keeps_opportunistic_jobs_off_what_it_waits_for():
    _, nodes, tenants, running, queued, *_ = CASES[4]
    scheduler = Scheduler(SchedulerConfig(aging_s=1e9))
    by_name = {t.name: t for t in tenants}
    # c's j1 alone: it is blocked, and parked for the next cycle
    first = ClusterView(tuple(nodes), by_name, tuple(running), (queued[0],), {}, 100.0)
    assert not scheduler.cycle(first).admit
    later = ClusterView(tuple(nodes), by_name, tuple(running), tuple(queued), {}, 110.0)
    result = scheduler.cycle(later)
    assert not result.admit and result.pending_reasons["j2"].code is PendingCode.INSUFFICIENT
