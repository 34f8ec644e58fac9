"""Table-driven tests of the scheduling cycle (pure: nodes, held placements, queue → result)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from builders import held, make_job, make_node
from gpuyard.scheduler import PendingCode, schedule


def admitted(result) -> list[str]:
    return [p.job_id for p in result.admit]


@pytest.mark.parametrize(
    ("nodes", "running", "queue", "want_admitted", "want_codes"),
    [
        pytest.param(
            [make_node(gpus=4)],
            [],
            [make_job("j1", gpus=2), make_job("j2", gpus=2)],
            ["j1", "j2"],
            {},
            id="two-fit",
        ),
        pytest.param(
            [make_node(gpus=4)],
            [],
            [make_job("j1", gpus=3), make_job("j2", gpus=2)],
            ["j1"],
            {"j2": PendingCode.INSUFFICIENT},
            id="second-waits",
        ),
        pytest.param(
            [make_node(gpus=4)],
            [],
            [make_job("j1", gpus=1, priority=0), make_job("j2", gpus=4, priority=5)],
            ["j2"],
            {"j1": PendingCode.INSUFFICIENT},
            id="priority-first",
        ),
        pytest.param(
            [make_node(gpus=4)],
            [held("n1", 0, 1, 2)],
            [make_job("j1", gpus=2), make_job("j2", gpus=1)],
            [],
            {"j1": PendingCode.INSUFFICIENT, "j2": PendingCode.BEHIND},
            id="strict-fifo-no-skipping",
        ),
        pytest.param(
            [make_node(gpus=4)],
            [],
            [make_job("j1", gpus=8), make_job("j2", gpus=1)],
            ["j2"],
            {"j1": PendingCode.EXCEEDS_NODE},
            id="too-big-does-not-block",
        ),
        pytest.param(
            [make_node(gpus=4)],
            [],
            [make_job("j1", gpus=1, gpu_type="V100")],
            [],
            {"j1": PendingCode.NO_GPU_TYPE},
            id="unknown-gpu-type",
        ),
        pytest.param(
            [make_node(gpus=4)],
            [],
            [make_job("j1", gpus=1, gpu_type="A100")],
            ["j1"],
            {},
            id="gpu-type-prefix-matches",
        ),
        pytest.param(
            [make_node(gpus=4)],
            [],
            [make_job("j1", gpus=3, tasks=2)],
            [],
            {"j1": PendingCode.EXCEEDS_NODE},
            id="gang-larger-than-cluster",
        ),
        pytest.param(
            [make_node("a", gpus=4), make_node("b", gpus=4)],
            [],
            [make_job("j1", gpus=3, tasks=2)],
            ["j1"],
            {},
            id="gang-spans-nodes",
        ),
        pytest.param(
            [make_node(gpus=0, cpu=2)],
            [],
            [make_job("j1", gpus=0, cpu=4)],
            [],
            {"j1": PendingCode.EXCEEDS_NODE},
            id="cpu-accounted",
        ),
        pytest.param(
            [make_node(gpus=0, memory_mb=2048)],
            [],
            [make_job("j1", gpus=0, memory_mb=1024), make_job("j2", gpus=0, memory_mb=1500)],
            ["j1"],
            {"j2": PendingCode.INSUFFICIENT},
            id="memory-accounted",
        ),
        pytest.param([], [], [make_job("j1")], [], {"j1": PendingCode.NO_NODES}, id="no-nodes"),
    ],
)
def test_cycle(nodes, running, queue, want_admitted, want_codes):
    result = schedule(nodes, running, queue)
    assert admitted(result) == want_admitted
    assert {k: v.code for k, v in result.pending_reasons.items()} == want_codes


def test_best_fit_prefers_the_fuller_node():
    nodes = [make_node("a", gpus=4), make_node("b", gpus=4)]
    result = schedule(nodes, [held("b", 0, 1)], [make_job("j1", gpus=2)])
    assert result.admit[0].tasks[0].node == "b"
    assert result.admit[0].tasks[0].gpu_indices == (2, 3)


def test_gang_places_every_task_or_none():
    nodes = [make_node("a", gpus=2), make_node("b", gpus=2)]
    result = schedule(nodes, [held("a", 0)], [make_job("j1", gpus=2, tasks=2)])
    assert result.admit == ()
    reason = result.pending_reasons["j1"]
    assert reason.code is PendingCode.INSUFFICIENT
    assert reason.message == (
        "needs 4 GPUs, 2 CPUs and 2048 MB for its 2 tasks at once; not enough is free together"
    )


def test_reason_names_gpu_shortfall_in_words():
    result = schedule([make_node(gpus=4)], [], [make_job("j1", gpus=8, gpu_type="A100")])
    assert result.pending_reasons["j1"].message == (
        "task worker/0 needs 8 GPUs of type A100 on one node; no node has more than 4"
    )


def test_busy_reason_says_how_many_are_free():
    result = schedule(
        [make_node(gpus=4)], [held("n1", 0, 1)], [make_job("j1", gpus=4, gpu_type="A100")]
    )
    assert result.pending_reasons["j1"].message == (
        "task worker/0 needs 4 GPUs of type A100 on one node; at most 2 free"
    )


def test_unhealthy_gpus_are_not_placed():
    node = make_node(gpus=2)
    node = replace(node, gpus=(replace(node.gpus[0], healthy=False), node.gpus[1]))
    result = schedule([node], [], [make_job("j1", gpus=1)])
    assert result.admit[0].tasks[0].gpu_indices == (1,)
