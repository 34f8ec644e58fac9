"""Table-driven tests of the multi-tenant cycle: quotas, borrowing, reclaim, order, limits."""

from __future__ import annotations

import pytest

from builders import held, make_job, make_node, make_running, make_tenant
from gpuyard.model import QueuePolicy, RunningJob, TenantUsage
from gpuyard.scheduler import ClusterView, PendingCode, Scheduler, SchedulerConfig

C = PendingCode
A, B = "a", "b"


def run(nodes, tenants=(), running=(), queued=(), now=100.0, usage=None, config=None):
    view = ClusterView(
        tuple(nodes), {t.name: t for t in tenants}, tuple(running), tuple(queued), usage or {}, now
    )
    return Scheduler(config).cycle(view)


def summary(result):
    return (
        [p.job_id for p in result.admit],
        sorted(a.job_id for a in result.admissions if a.opportunistic),
        [p.job_id for p in result.preempt],
        {k: v.code for k, v in result.pending_reasons.items()},
    )


N8 = [make_node("n1", gpus=8)]
CASES = [
    # (id, nodes, tenants, running, queued, admitted, opportunistic, preempted, codes)
    ("plain-cluster", N8, [], [], [make_job("j1", 4), make_job("j2", 4)], ["j1", "j2"], [], [], {}),
    (
        "plain-strict-order",
        N8,
        [],
        [],
        [make_job("j1", 9), make_job("j2", 1)],
        ["j2"],
        [],
        [],
        {"j1": C.EXCEEDS_NODE},
    ),
    (
        "within-guarantee",
        N8,
        [make_tenant(A, 4)],
        [],
        [make_job("j1", 4, tenant=A)],
        ["j1"],
        [],
        [],
        {},
    ),
    (
        "borrows-idle",
        N8,
        [make_tenant(A, 2)],
        [],
        [make_job("j1", 4, tenant=A)],
        ["j1"],
        ["j1"],
        [],
        {},
    ),
    (
        "unknown-tenant-is-opportunistic",
        N8,
        [make_tenant(A, 2)],
        [],
        [make_job("j1", 1, tenant="x")],
        ["j1"],
        ["j1"],
        [],
        {},
    ),
    (
        "never-over-borrowing-limit",
        N8,
        [make_tenant(A, 2, borrowing_limit=1)],
        [],
        [make_job("j1", 4, tenant=A), make_job("j2", 1, tenant=A)],
        ["j2"],
        [],
        [],
        {"j1": C.BORROWING_LIMIT},
    ),
    (
        "borrowing-limit-reached",
        N8,
        [make_tenant(A, 2, borrowing_limit=2)],
        [make_running("r1", A, "n1", 0, 1, 2, borrowed=1)],
        [make_job("j1", 2, tenant=A)],
        [],
        [],
        [],
        {"j1": C.BORROWING_LIMIT},
    ),
    (
        "lender-keeps-its-quota",
        N8,
        [make_tenant(A, 2), make_tenant(B, 6, lending_limit=0)],
        [],
        [make_job("j1", 4, tenant=A)],
        [],
        [],
        [],
        {"j1": C.QUOTA_EXCEEDED},
    ),
    (
        "reclaim-from-borrower",
        N8,
        [make_tenant(A, 4), make_tenant(B, 4)],
        [make_running("rb", B, "n1", 0, 1, 2, 3, 4, 5, borrowed=2)],
        [make_job("j1", 4, tenant=A)],
        [],
        [],
        ["rb"],
        {"j1": C.WAITING_FOR_PREEMPTION},
    ),
    (
        "never-preempt-guaranteed",
        N8,
        [make_tenant(A, 4), make_tenant(B, 8)],
        [make_running("rb", B, "n1", 0, 1, 2, 3, 4, 5)],
        [make_job("j1", 4, tenant=A)],
        [],
        [],
        [],
        {"j1": C.INSUFFICIENT},
    ),
    (
        "borrower-cannot-reclaim",
        N8,
        [make_tenant(A, 0), make_tenant(B, 0)],
        [make_running("rb", B, "n1", *range(8), borrowed=8)],
        [make_job("j1", 4, tenant=A)],
        [],
        [],
        [],
        {"j1": C.INSUFFICIENT},
    ),
    (
        "victim-lowest-priority",
        N8,
        [make_tenant(A, 4)],
        [
            make_running("hi", B, "n1", 0, 1, 2, 3, borrowed=4, priority=5),
            make_running("lo", B, "n1", 4, 5, 6, 7, borrowed=4, priority=0),
        ],
        [make_job("j1", 4, tenant=A)],
        [],
        [],
        ["lo"],
        {"j1": C.WAITING_FOR_PREEMPTION},
    ),
    (
        "victim-least-progress",
        N8,
        [make_tenant(A, 4)],
        [
            make_running("old", B, "n1", 0, 1, 2, 3, borrowed=4, started_at=0),
            make_running("new", B, "n1", 4, 5, 6, 7, borrowed=4, started_at=90),
        ],
        [make_job("j1", 4, tenant=A)],
        [],
        [],
        ["new"],
        {"j1": C.WAITING_FOR_PREEMPTION},
    ),
    (
        "victims-minimal-set",
        N8,
        [make_tenant(A, 4), make_tenant(B, 3)],
        [
            make_running("r1", B, "n1", 0, borrowed=1, started_at=0),
            make_running("r4", B, "n1", 1, 2, 3, 4, borrowed=4, started_at=50),
            make_running("rg", B, "n1", 5, 6, 7),
        ],
        [make_job("j1", 4, tenant=A)],
        [],
        [],
        ["r4"],
        {"j1": C.WAITING_FOR_PREEMPTION},
    ),
    (
        "waits-for-terminating",
        N8,
        [make_tenant(A, 4)],
        [make_running("rb", B, "n1", *range(8), borrowed=8, terminating=True)],
        [make_job("j1", 4, tenant=A)],
        [],
        [],
        [],
        {"j1": C.WAITING_FOR_PREEMPTION},
    ),
    (
        "priority-preemption-in-tenant",
        N8,
        [make_tenant(A, 8, priority_preemption=True)],
        [make_running("lo", A, "n1", *range(8), priority=0)],
        [make_job("j1", 8, tenant=A, priority=5)],
        [],
        [],
        ["lo"],
        {"j1": C.WAITING_FOR_PREEMPTION},
    ),
    (
        "no-priority-preemption-by-default",
        N8,
        [make_tenant(A, 8)],
        [make_running("lo", A, "n1", *range(8), priority=0)],
        [make_job("j1", 8, tenant=A, priority=5)],
        [],
        [],
        [],
        {"j1": C.INSUFFICIENT},
    ),
    (
        "drf-lowest-share-first",
        N8,
        [make_tenant(A, 4), make_tenant(B, 4)],
        [make_running("ra", A, "n1", 0, 1, 2, 3), make_running("rb", B, "n1", 4, 5, 6)],
        [make_job("j1", 1, tenant=A), make_job("j2", 1, tenant=B)],
        ["j2"],
        [],
        [],
        {"j1": C.INSUFFICIENT},
    ),
    (
        "backfill-inside-tenant",  # strict without `tenant_backfill`: test_backfill_las.py
        N8,
        [make_tenant(A, 8)],
        [make_running("ra", A, "n1", 0, 1, 2, 3)],
        [make_job("j1", 8, tenant=A), make_job("j2", 1, tenant=A)],
        ["j2"],
        [],
        [],
        {"j1": C.INSUFFICIENT},
    ),
    (
        "fifo-inside-tenant",
        N8,
        [make_tenant(A, 8, queue_policy=QueuePolicy.FIFO)],
        [make_running("ra", A, "n1", *range(7))],
        [make_job("j1", 1, tenant=A, attained_gpu_s=99_999), make_job("j2", 1, tenant=A)],
        ["j1"],
        [],
        [],
        {"j2": C.INSUFFICIENT},
    ),
    (
        "las-inside-tenant",  # the default queue policy (issue 16)
        N8,
        [make_tenant(A, 8, queue_policy=QueuePolicy.LAS)],
        [make_running("ra", A, "n1", *range(7))],
        [make_job("j1", 1, tenant=A, attained_gpu_s=99_999), make_job("j2", 1, tenant=A)],
        ["j2"],
        [],
        [],
        {"j1": C.INSUFFICIENT},
    ),
    (
        "priority-inside-tenant",
        N8,
        [make_tenant(A, 8)],
        [make_running("ra", A, "n1", *range(7))],
        [make_job("j1", 1, tenant=A), make_job("j2", 1, tenant=A, priority=3)],
        ["j2"],
        [],
        [],
        {"j1": C.INSUFFICIENT},
    ),
    (
        "aging-beats-priority",
        N8,
        [make_tenant(A, 8)],
        [make_running("ra", A, "n1", *range(7))],
        [
            make_job("j1", 1, tenant=A, submitted_at=-48 * 3600),  # promoted
            make_job("j2", 1, tenant=A, priority=3, submitted_at=50),
        ],
        ["j1"],
        [],
        [],
        {"j2": C.INSUFFICIENT},
    ),
    (
        "promoted-job-holds-nothing",  # promotion never holds capacity (issue 16)
        N8,
        [make_tenant(A, 0), make_tenant(B, 0)],
        [make_running("r", B, "n1", 0, 1, 2, 3, borrowed=4)],
        [
            make_job("j1", 8, tenant=A, submitted_at=-4000),
            make_job("j2", 1, tenant=B, submitted_at=50),
        ],
        ["j2"],
        ["j2"],
        [],
        {"j1": C.INSUFFICIENT},
    ),
    (
        "user-gpu-limit",
        N8,
        [make_tenant(A, 8, max_gpus_per_user=2)],
        [make_running("r", A, "n1", 0, 1, owner="alice")],
        [make_job("j1", 1, tenant=A, owner="alice"), make_job("j2", 1, tenant=A, owner="bob")],
        ["j2"],
        [],
        [],
        {"j1": C.USER_GPU_LIMIT},
    ),
    (
        "user-job-limit",
        N8,
        [make_tenant(A, 8, max_running_jobs_per_user=1)],
        [],
        [
            make_job("j1", 1, tenant=A, owner="alice"),
            make_job("j2", 1, tenant=A, owner="alice"),
            make_job("j3", 1, tenant=A, owner="bob"),
        ],
        ["j1", "j3"],
        [],
        [],
        {"j2": C.USER_JOB_LIMIT},
    ),
    (
        "fragmented",
        [make_node("a", gpus=4), make_node("b", gpus=4)],
        [make_tenant(A, 8)],
        [make_running("r1", A, "a", 0, 1), make_running("r2", A, "b", 0, 1)],
        [make_job("j1", 4, tenant=A)],
        [],
        [],
        [],
        {"j1": C.FRAGMENTED},
    ),
    (
        "gang-spans-fewest-nodes",
        [make_node("a", gpus=8), make_node("b", gpus=8)],
        [],
        [],
        [make_job("j1", 8, tasks=2)],
        ["j1"],
        [],
        [],
        {},
    ),
]


@pytest.mark.parametrize(
    ("nodes", "tenants", "running", "queued", "admitted", "opportunistic", "preempted", "codes"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_multitenant_cycle(
    nodes, tenants, running, queued, admitted, opportunistic, preempted, codes
):
    result = run(nodes, tenants, running, queued)
    assert summary(result) == (admitted, opportunistic, preempted, codes)


@pytest.mark.parametrize(
    ("nodes", "tenants", "running", "queued", "admitted", "opportunistic", "preempted", "codes"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_unexplained_cycle_decides_the_same(
    nodes, tenants, running, queued, admitted, opportunistic, preempted, codes
):
    """`SchedulerConfig.explain=False` (the simulator's): the same decisions and codes."""
    result = run(nodes, tenants, running, queued, config=SchedulerConfig(explain=False))
    assert summary(result) == (admitted, opportunistic, preempted, codes)


def test_unexplained_capacity_wait_has_no_message_and_no_estimate():
    running = [make_running("r1", A, "n1", *range(8), max_runtime_s=300, started_at=0)]
    explained = run(N8, [], running, [make_job("j1", 6)], now=10).pending_reasons["j1"]
    assert explained.estimated_start == 300 and "estimated start" in explained.message
    config = SchedulerConfig(explain=False)
    bare = run(N8, [], running, [make_job("j1", 6)], now=10, config=config).pending_reasons["j1"]
    assert bare.code is explained.code is C.INSUFFICIENT
    assert bare.estimated_start is None and "needs" not in bare.message


def test_borrowed_amount_per_flavor():
    result = run(N8, [make_tenant(A, 2)], [], [make_job("j1", 4, tenant=A)])
    assert result.admissions[0].borrowed == (("A100-80GB", 2),)


def test_preemption_carries_victims_grace_and_reason():
    tenants = [make_tenant(A, 4), make_tenant(B, 0, preemption_grace_s=120)]
    running = [make_running("rb", B, "n1", *range(8), borrowed=8)]
    result = run(N8, tenants, running, [make_job("j1", 4, tenant=A)], now=100)
    (p,) = result.preempt
    assert (p.job_id, p.for_job_id, p.grace_s) == ("rb", "j1", 120)
    assert "tenant a reclaims A100-80GB GPUs" in p.reason
    reason = result.pending_reasons["j1"]
    assert reason.estimated_start == 220
    assert "waiting for 1 preempted job to stop (rb of tenant b)" in reason.message


def test_reason_names_position_and_holders():
    tenants = [make_tenant(A, 4), make_tenant(B, 4)]
    running = [make_running("rb", B, "n1", *range(8), borrowed=4)]
    queued = [make_job(f"j{i}", 8, tenant=B) for i in range(1, 4)]
    reasons = run(N8, tenants, running, queued).pending_reasons
    assert reasons["j1"].message.startswith(
        "needs 8 A100-80GB GPUs; 0 free; held by b 8 (4 borrowed)"
    )
    assert reasons["j1"].message.endswith("(1st of 3 in tenant b)")
    assert (reasons["j3"].position, reasons["j3"].queue_length) == (3, 3)
    # no node has 8 GPUs free, so no backfill is looked for: j3 waits behind j1
    assert reasons["j3"].code is C.BEHIND


@pytest.mark.parametrize(
    ("max_runtime", "want"),
    [pytest.param(300, 300.0, id="deadline-known"), pytest.param(None, None, id="unbounded")],
)
def test_estimated_start_from_max_runtime(max_runtime, want):
    running = [
        make_running("r1", A, "n1", 0, 1, 2, 3, max_runtime_s=max_runtime, started_at=0),
        make_running("r2", A, "n1", 4, 5, 6, 7, max_runtime_s=50, started_at=0),
    ]
    reason = run(N8, [], running, [make_job("j1", 6)], now=10).pending_reasons["j1"]
    assert reason.estimated_start == want


def test_budget_exhausted_blocks_the_tenant_until_the_period_ends():
    tenants = [make_tenant(A, 8, gpu_hour_budget=50)]
    usage = {A: TenantUsage(gpu_hours=60, period_ends_at=5000)}
    reasons = run(N8, tenants, [], [make_job("j1", 1, tenant=A)], usage=usage).pending_reasons
    assert reasons["j1"].code is C.BUDGET_EXHAUSTED
    assert reasons["j1"].estimated_start == 5000


def test_multi_gpu_task_stays_in_one_topology_group():
    node = make_node("n1", gpus=8, groups=2)
    result = run([node], [], [make_running("r", A, "n1", 0)], [make_job("j1", 4)])
    assert result.admit[0].tasks[0].gpu_indices == (4, 5, 6, 7)


def test_best_fit_keeps_empty_nodes_whole():
    nodes = [make_node("a", gpus=8), make_node("b", gpus=8)]
    result = run(nodes, [], [make_running("r", A, "b", 0, 1)], [make_job("j1", 2)])
    assert result.admit[0].tasks[0].node == "b"


def test_multi_task_job_packs_on_one_node():
    nodes = [make_node("a", gpus=8), make_node("b", gpus=8)]
    result = run(nodes, [], [], [make_job("j1", 2, tasks=3)])
    assert {t.node for t in result.admit[0].tasks} == {"a"}


def test_parked_tenant_is_woken_by_a_release():
    scheduler = Scheduler()
    tenants = {A: make_tenant(A, 8)}
    full = RunningJob("r", A, (held("n1", *range(8)),), 0.0)
    queued = (make_job("j1", 2, tenant=A),)
    first = scheduler.cycle(ClusterView(tuple(N8), tenants, (full,), queued, {}, 10.0))
    again = scheduler.cycle(ClusterView(tuple(N8), tenants, (full,), queued, {}, 11.0))
    assert first.pending_reasons == again.pending_reasons
    freed = scheduler.cycle(ClusterView(tuple(N8), tenants, (), queued, {}, 12.0))
    assert [p.job_id for p in freed.admit] == ["j1"]
