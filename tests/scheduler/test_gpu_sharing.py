"""GPU sharing by memory: per-GPU shared/exclusive modes, best-fit packing, memory quotas."""

from __future__ import annotations

import pytest

from builders import (
    held,
    make_job,
    make_node,
    make_running,
    make_shared_job,
    make_shared_running,
    make_tenant,
    shared,
)
from gpuyard.model import FlavorQuota, Tenant
from gpuyard.scheduler import (
    ClusterSnapshot,
    ClusterView,
    PendingCode,
    Scheduler,
    explain_no_fit,
    place_job,
)
from gpuyard.scheduler.quota import gpu_memory_key
from gpuyard.scheduler.state import ClusterState

C = PendingCode
A, B = "a", "b"
GPU_MB = 81920
N2 = [make_node("n1", gpus=2)]
MEM = gpu_memory_key("A100-80GB")


def run(nodes, tenants=(), running=(), queued=()):
    view = ClusterView(
        tuple(nodes), {t.name: t for t in tenants}, tuple(running), tuple(queued), {}, 100.0
    )
    return Scheduler().cycle(view)


def where(result):
    """job → [(node, gpus, MB)] of its tasks."""
    return {
        p.job_id: [(t.node, t.gpu_indices, t.gpu_memory_mb) for t in p.tasks] for p in result.admit
    }


def memory_tenant(name, mb, borrowing=None, lending=None, gpus=0):
    return Tenant(name, quotas=(FlavorQuota("A100-80GB", gpus, None, None, mb, borrowing, lending),))


PLACEMENTS = [
    # (id, nodes, running, queued, expected placements)
    (
        "two-shared-tasks-one-gpu",
        N2,
        [],
        [make_shared_job("s1", 20000), make_shared_job("s2", 20000)],
        {"s1": [("n1", (0,), 20000)], "s2": [("n1", (0,), 20000)]},
    ),
    (
        "best-fit-on-free-memory",
        N2,
        [make_shared_running("r0", A, "n1", 0, 20000), make_shared_running("r1", A, "n1", 1, 60000)],
        [make_shared_job("s1", 20000)],
        {"s1": [("n1", (1,), 20000)]},
    ),
    (
        "too-big-for-the-fuller-gpu",
        N2,
        [make_shared_running("r0", A, "n1", 0, 20000), make_shared_running("r1", A, "n1", 1, 60000)],
        [make_shared_job("s1", 30000)],
        {"s1": [("n1", (0,), 30000)]},
    ),
    (
        "shared-gpu-before-free-gpu-elsewhere",
        [make_node("n1", gpus=2), make_node("n2", gpus=1)],
        [make_shared_running("r0", A, "n1", 1, 20000)],
        [make_shared_job("s1", 20000)],
        {"s1": [("n1", (1,), 20000)]},
    ),
    (
        "opens-free-gpu-on-the-fullest-node",
        [make_node("n1", gpus=4), make_node("n2", gpus=2)],
        [make_running("r0", A, "n2", 0)],
        [make_shared_job("s1", 20000)],
        {"s1": [("n2", (1,), 20000)]},
    ),
    (
        "whole-gpu-task-skips-the-shared-gpu",
        N2,
        [make_shared_running("r0", A, "n1", 0, 1000)],
        [make_job("w1", 1)],
        {"w1": [("n1", (1,), 0)]},
    ),
    (
        "shared-task-never-on-an-exclusive-gpu",
        N2,
        [make_running("r0", A, "n1", 0)],
        [make_shared_job("s1", 1000)],
        {"s1": [("n1", (1,), 1000)]},
    ),
    (
        "fractions-of-one-job-share-a-gpu",
        N2,
        [],
        [make_shared_job("s1", milli=500, tasks=2)],
        {"s1": [("n1", (0,), GPU_MB // 2), ("n1", (0,), GPU_MB // 2)]},
    ),
    (
        "mixed-job-whole-and-shared",
        N2,
        [],
        [make_job("w1", 1), make_shared_job("s2", 1000)],
        {"w1": [("n1", (0,), 0)], "s2": [("n1", (1,), 1000)]},
    ),
]


@pytest.mark.parametrize(
    ("nodes", "running", "queued", "expected"),
    [case[1:] for case in PLACEMENTS],
    ids=[case[0] for case in PLACEMENTS],
)
def test_shared_placements(nodes, running, queued, expected):
    assert where(run(nodes, running=running, queued=queued)) == expected


WAITS = [
    # (id, nodes, running, queued, job → (code, words in the reason))
    (
        "whole-gpu-waits-while-every-gpu-is-shared",
        N2,
        [make_shared_running("r0", A, "n1", 0, 1000), make_shared_running("r1", A, "n1", 1, 1000)],
        [make_job("w1", 1)],
        {"w1": (C.INSUFFICIENT, "0 free, 2 in shared mode (never given whole)")},
    ),
    (
        "third-half-waits-on-a-one-gpu-node",
        [make_node("n1", gpus=1)],
        [],
        [make_shared_job(f"s{i}", milli=500) for i in range(1, 4)],
        {"s3": (C.INSUFFICIENT, "1 shared GPUs have at most 0 MB free and 0 GPUs are free")},
    ),
    (
        "bigger-than-any-gpu",
        N2,
        [],
        [make_shared_job("s1", 90000)],
        {"s1": (C.EXCEEDS_NODE, "the largest GPU has 81920 MB")},
    ),
    (
        "no-gpu-of-that-type",
        N2,
        [],
        [make_shared_job("s1", 1000, gpu_type="H100")],
        {"s1": (C.NO_GPU_TYPE, "needs GPUs of type H100")},
    ),
]


@pytest.mark.parametrize(
    ("nodes", "running", "queued", "expected"),
    [case[1:] for case in WAITS],
    ids=[case[0] for case in WAITS],
)
def test_shared_waits(nodes, running, queued, expected):
    result = run(nodes, running=running, queued=queued)
    got = {k: (v.code, v.message) for k, v in result.pending_reasons.items()}
    assert {k: code for k, (code, _) in got.items()} == {k: c for k, (c, _) in expected.items()}
    for job, (_, words) in expected.items():
        assert words in got[job][1]


def test_v1_place_job_and_its_reason_say_the_gpus_are_shared():
    snap = ClusterSnapshot(N2, [shared("n1", 0, 1000), shared("n1", 1, 1000)])
    job = make_job("w1", 1)
    assert place_job(snap, job) is None
    reason = explain_no_fit(snap, job)
    assert reason.code is C.INSUFFICIENT
    assert "2 GPUs are in shared mode" in reason.message
    placed = place_job(snap, make_shared_job("s1", 2000))
    assert placed is not None and placed.tasks[0].gpu_memory_mb == 2000


QUOTAS = [
    # (id, tenants, running, queued, admitted, opportunistic, codes)
    (
        "memory-quota-guaranteed",
        [memory_tenant(A, 40000, borrowing=0)],
        [],
        [make_shared_job("s1", 20000, tenant=A), make_shared_job("s2", 20000, tenant=A)],
        ["s1", "s2"],
        [],
        {},
    ),
    (
        "memory-quota-borrowing-limit",
        [memory_tenant(A, 40000, borrowing=0)],
        [make_shared_running("r0", A, "n1", 0, 30000)],
        [make_shared_job("s1", 20000, tenant=A)],
        [],
        [],
        {"s1": C.BORROWING_LIMIT},
    ),
    (
        "memory-quota-borrows-idle-memory",
        [memory_tenant(A, 10000)],
        [],
        [make_shared_job("s1", 20000, tenant=A)],
        ["s1"],
        ["s1"],
        {},
    ),
    (
        "memory-lender-reserves-its-guarantee",
        [memory_tenant(A, 0), memory_tenant(B, 2 * GPU_MB - 10000, lending=0)],
        [],
        [make_shared_job("s1", 20000, tenant=A)],
        [],
        [],
        {"s1": C.QUOTA_EXCEEDED},
    ),
    (
        "gpu-quota-charges-a-half-as-one-gpu",
        [make_tenant(A, 1, borrowing_limit=0)],
        [],
        [make_shared_job("s1", milli=500, tenant=A), make_shared_job("s2", milli=500, tenant=A)],
        ["s1"],
        [],
        {"s2": C.BORROWING_LIMIT},
    ),
    (
        "gpu-quota-rounds-up-per-job",
        [make_tenant(A, 1, borrowing_limit=0)],
        [],
        [make_shared_job("s1", milli=500, tasks=2, tenant=A)],
        ["s1"],
        [],
        {},
    ),
]


@pytest.mark.parametrize(
    ("tenants", "running", "queued", "admitted", "opportunistic", "codes"),
    [case[1:] for case in QUOTAS],
    ids=[case[0] for case in QUOTAS],
)
def test_gpu_memory_quotas(tenants, running, queued, admitted, opportunistic, codes):
    result = run(N2, tenants, running, queued)
    assert [p.job_id for p in result.admit] == admitted
    assert sorted(a.job_id for a in result.admissions if a.opportunistic) == opportunistic
    assert {k: v.code for k, v in result.pending_reasons.items()} == codes


@pytest.mark.parametrize(
    ("tenant", "expected"),
    [
        (memory_tenant(A, 40000), {MEM: 30000}),  # charged in MB only
        (make_tenant(A, 2), {MEM: 30000, "A100-80GB": 1}),  # and ⌈30000/81920⌉ GPUs
    ],
)
def test_a_shared_job_is_charged_by_the_tenants_quota_kind(tenant, expected):
    state = ClusterState()
    running = make_shared_running("r0", A, "n1", 0, 30000)
    state.sync(N2, {A: tenant}, [running])
    usage = state.charged["r0"].usage
    assert {k: v for k, v in usage.items() if k not in ("cpu", "memory")} == expected
    assert state.free(MEM) == 2 * GPU_MB - 30000
    assert state.free("A100-80GB") == 1
    assert running.gpus == 0  # no whole GPU held


def test_snapshot_modes_per_gpu():
    snap = ClusterSnapshot(N2)
    undo_a = snap.assume_task(shared("n1", 0, 30000))
    undo_b = snap.assume_task(shared("n1", 0, 20000, index=1))
    nf = snap.nodes["n1"]
    assert (nf.free_gpus, nf.shared, snap.shared) == ({1}, {0: GPU_MB - 50000}, {("n1", 0): None})
    assert snap.free_by_flavor["A100-80GB"] == 1
    assert snap.free_gpu_memory_by_flavor["A100-80GB"] == 2 * GPU_MB - 50000
    undo_b()
    assert nf.shared == {0: GPU_MB - 30000} and nf.free_gpus == {1}
    undo_a()  # the last shared task left: the GPU is free again, whole
    assert (nf.free_gpus, nf.shared, snap.shared) == ({0, 1}, {}, {})
    assert snap.free_by_flavor["A100-80GB"] == 2
    assert snap.free_gpu_memory_by_flavor["A100-80GB"] == 2 * GPU_MB


def test_refunding_a_whole_gpu_task_never_frees_a_shared_gpu():
    """An inconsistent view (a whole-GPU and a shared task on one GPU) stays shared."""
    snap = ClusterSnapshot(N2, [shared("n1", 0, 1000)])
    undo = snap.release_tasks([held("n1", 0)])
    assert snap.nodes["n1"].free_gpus == {1} and 0 in snap.nodes["n1"].shared
    undo()
