"""Jobs without gang allocation (`JobDemand.gang=False`, OpenPAI's `gangAllocation: false`):
when not all of its tasks fit, a job starts with the most of its first tasks that quota,
placement and its owner's limits allow (at least one); the tasks not placed wait as the
running job's remainder (`JobDemand.remainder`), which adds tasks to it as room frees and
never preempts anyone. Quota is charged per placed task."""

from __future__ import annotations

import pytest

from builders import make_job, make_node, make_running, make_tenant
from gpuyard.model import JobPlacement, Resources, RunningJob, TaskPlacement
from gpuyard.scheduler import ClusterView, PendingCode, Scheduler, SchedulerConfig

A, B = "a", "b"
N4 = [make_node("n1", gpus=4)]


def cycle(nodes, tenants, running, queued, scheduler=None, now=100.0):
    view = ClusterView(
        tuple(nodes), {t.name: t for t in tenants}, tuple(running), tuple(queued), {}, now
    )
    return (scheduler or Scheduler(SchedulerConfig(aging_s=1e9))).cycle(view)


def running_tasks(job_id: str, tenant: str, placement: JobPlacement | None = None, *gpus: int):
    """A running job holding one GPU per task: from an admission's placement, or on n1's
    `gpus` (task i on GPU i)."""
    tasks = placement.tasks if placement is not None else tuple(
        TaskPlacement("worker", i, "n1", (g,), Resources.of(1, 1024, 1))
        for i, g in enumerate(gpus)
    )
    return RunningJob(job_id, tenant, tasks, 0.0)


def tasks_of(result, job_id: str) -> list[int]:
    return [t.index for p in result.admit if p.job_id == job_id for t in p.tasks]


CASES = [
    # (id, tenants, running, queued, admitted: {job: task indices}, waits: {job: code})
    (
        "all-fit-all-start",
        [make_tenant(A)],
        [],
        [make_job("j1", 1, tasks=4, tenant=A, gang=False)],
        {"j1": [0, 1, 2, 3]},
        {},
    ),
    (
        "starts-the-tasks-that-fit",  # 6 tasks on 4 free GPUs: 4 now
        [make_tenant(A)],
        [],
        [make_job("j1", 1, tasks=6, tenant=A, gang=False)],
        {"j1": [0, 1, 2, 3]},
        {},
    ),
    (
        "a-gang-of-the-same-tasks-never-runs-here",
        [make_tenant(A)],
        [],
        [make_job("j1", 1, tasks=6, tenant=A)],
        {},
        {"j1": PendingCode.EXCEEDS_NODE},
    ),
    (
        "what-is-free-now",  # 1 GPU free: 1 task
        [make_tenant(A), make_tenant(B)],
        [make_running("r1", B, "n1", 0, 1, 2)],
        [make_job("j1", 1, tasks=6, tenant=A, gang=False)],
        {"j1": [0]},
        {},
    ),
    (
        "none-fits-it-waits",
        [make_tenant(A), make_tenant(B)],
        [make_running("r1", B, "n1", 0, 1, 2, 3)],
        [make_job("j1", 1, tasks=6, tenant=A, gang=False)],
        {},
        {"j1": PendingCode.INSUFFICIENT},
    ),
    (
        "quota-charged-per-placed-task",  # guaranteed 2, may not borrow: 2 tasks
        [make_tenant(A, 2, borrowing_limit=0), make_tenant(B, 2)],
        [],
        [make_job("j1", 1, tasks=6, tenant=A, gang=False)],
        {"j1": [0, 1]},
        {},
    ),
    (
        "a-task-over-the-borrowing-limit-never-runs",
        [make_tenant(A, 2, borrowing_limit=0), make_tenant(B, 2)],
        [],
        [make_job("j1", 3, tasks=2, tenant=A, gang=False)],
        {},
        {"j1": PendingCode.BORROWING_LIMIT},
    ),
    (
        "owner-gpu-limit-per-placed-task",
        [make_tenant(A, max_gpus_per_user=3)],
        [],
        [make_job("j1", 1, tasks=6, tenant=A, owner="u", gang=False)],
        {"j1": [0, 1, 2]},
        {},
    ),
    (
        "remainder-adds-to-the-running-job",  # j1 runs tasks 0-1; tasks 2-5 wait
        [make_tenant(A)],
        [running_tasks("j1", A, None, 0, 1)],
        [make_job("j1", 1, tasks=4, tenant=A, gang=False, remainder=True, first_index=2)],
        {"j1": [2, 3]},
        {},
    ),
    (
        "remainder-is-not-a-new-job-for-the-job-limit",
        [make_tenant(A, max_running_jobs_per_user=1)],
        [RunningJob("j1", A, running_tasks("x", A, None, 0).placements, 0.0, owner="u")],
        [make_job("j1", 1, tasks=2, tenant=A, owner="u", gang=False, remainder=True,
                  first_index=1)],
        {"j1": [1, 2]},
        {},
    ),
    (
        "remainder-never-preempts",  # b borrows a's guarantee: a fresh job would reclaim
        [make_tenant(A, 4), make_tenant(B)],
        [running_tasks("j1", A, None, 0, 1), make_running("r1", B, "n1", 2, 3, borrowed=2)],
        [make_job("j1", 1, tasks=2, tenant=A, gang=False, remainder=True, first_index=2)],
        {},
        {"j1": PendingCode.INSUFFICIENT},
    ),
]


@pytest.mark.parametrize(
    "tenants,running,queued,admitted,waits", [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_no_gang(tenants, running, queued, admitted, waits):
    result = cycle(N4, tenants, running, queued)
    assert {p.job_id: tasks_of(result, p.job_id) for p in result.admit} == admitted
    assert not result.preempt
    for job_id, code in waits.items():
        assert result.pending_reasons[job_id].code is code


def test_a_fresh_job_without_gang_still_reclaims_its_guarantee():
    """As any job: b borrows a's 4 GPUs; j1 (2 tasks of 2 GPUs) stops r1 for them."""
    result = cycle(
        N4,
        [make_tenant(A, 4), make_tenant(B)],
        [make_running("r1", B, "n1", 0, 1, 2, 3, borrowed=4)],
        [make_job("j1", 2, tasks=2, tenant=A, gang=False)],
    )
    assert [p.job_id for p in result.preempt] == ["r1"]
    assert result.pending_reasons["j1"].code is PendingCode.WAITING_FOR_PREEMPTION


def test_the_rest_starts_as_room_frees_over_cycles():
    """The 500-task idea at small scale: 6 tasks on 4 GPUs start 4, then 2 after a release;
    the snapshot holds exactly what the view says after each admission."""
    sched = Scheduler(SchedulerConfig(aging_s=1e9))
    tenants = [make_tenant(A)]
    first = cycle(N4, tenants, [], [make_job("j1", 1, tasks=6, tenant=A, gang=False)], sched)
    assert tasks_of(first, "j1") == [0, 1, 2, 3]
    j1 = running_tasks("j1", A, first.admit[0])
    rest = make_job("j1", 1, tasks=2, tenant=A, gang=False, remainder=True, first_index=4)
    other = make_job("k2", 1, tenant=A)
    second = cycle(N4, tenants, [j1], [rest, other], sched)
    assert not second.admit and second.pending_reasons["j1"].code is PendingCode.INSUFFICIENT
    # tasks 0 and 1 end: the rest starts on their GPUs, before the tenant's later job
    j1 = RunningJob("j1", A, j1.placements[2:], 0.0)
    third = cycle(N4, tenants, [j1], [rest, other], sched)
    assert tasks_of(third, "j1") == [4, 5] and "k2" not in {p.job_id for p in third.admit}
    # the added tasks are now in the running job: nothing is free, nothing counted twice
    j1 = RunningJob("j1", A, j1.placements + third.admit[0].tasks, 0.0)
    fourth = cycle(N4, tenants, [j1], [other], sched)
    assert not fourth.admit
    fifth = cycle(N4, tenants, [RunningJob("j1", A, j1.placements[1:], 0.0)], [other], sched)
    assert tasks_of(fifth, "k2") == [0]
