"""The snapshot is a function of what is charged: undoing a what-if (a gang that half fits,
a trial preemption that fails) restores it exactly, bucket order included, whatever the
order of the changes; a GPU named by two charged tasks is free only once both have left."""

from __future__ import annotations

import itertools

import pytest

from builders import held, make_job, make_node
from gpuyard.scheduler.packing import FreeCounts, place_gang
from gpuyard.scheduler.snapshot import ClusterSnapshot


def state(s: ClusterSnapshot):
    nodes = {
        n: (nf.cpu_milli, sorted(nf.free_gpus), dict(nf.free_by_flavor))
        for n, nf in s.nodes.items()
    }
    buckets = {key: [list(names) for names in by_count] for key, by_count in s.buckets.items()}
    return nodes, buckets, s.free_by_flavor, s.free_cpu_milli, s.free_memory_mb  # in order


def cluster() -> ClusterSnapshot:
    nodes = [make_node(f"n{i}", gpus=4) for i in (3, 1, 2, 0)]
    return ClusterSnapshot(nodes, [held("n0", 0, 1), held("n1", 0), held("n2", 0, 1, 2)])


JOBS = [held("n0", 2), held("n1", 1, 2), held("n3", 0, 1, 2, 3), held("n2", 3)]


@pytest.mark.parametrize("order", list(itertools.permutations(range(len(JOBS)))))
def test_charging_in_any_order_gives_the_same_snapshot(order):
    a, b = cluster(), cluster()
    for t in JOBS:
        a.assume_task(t)
    for i in order:
        b.assume_task(JOBS[i])
    assert state(a) == state(b)


def test_undone_releases_restore_bucket_order():
    s = cluster()
    before = state(s)
    undos = [s.release_tasks([t]) for t in (held("n2", 0, 1, 2), held("n0", 0, 1))]
    s.release_tasks([held("n1", 0)])()  # released and put back at once
    for undo in reversed(undos):
        undo()
    assert state(s) == before


def test_a_gang_that_half_fits_leaves_the_snapshot_as_it_was():
    s = cluster()
    before = state(s)
    assert place_gang(s, make_job("j1", gpus=3, tasks=3), "A100-80GB") is None
    assert state(s) == before


def test_a_gpu_held_twice_is_free_once_both_holders_left():
    s = cluster()
    victim, held_for = held("n3", 0, 1), held("n3", 1, 2)
    s.assume_task(victim)
    s.assume_task(held_for)  # a job held on a stopping victim's GPU
    s.release_tasks([victim])
    assert sorted(s.nodes["n3"].free_gpus) == [0, 3]
    s.release_tasks([held_for])
    assert sorted(s.nodes["n3"].free_gpus) == [0, 1, 2, 3]


@pytest.mark.parametrize(
    "gpus, tasks, extra, fits",
    [
        (4, 1, {}, True),  # n3 is idle
        (8, 2, {}, False),  # one idle node only
        (8, 2, {"n2": [0, 1, 2]}, True),  # n2 whole once its job is gone
        (6, 2, {"n0": [0]}, True),  # 3 + 3 on n3 and n0
        (12, 3, {"n0": [0, 1]}, False),  # three 4-GPU holes needed, two at most
        (5, 5, {}, True),  # one-GPU tasks anywhere
        (11, 11, {}, False),  # 10 free in total
    ],
)
@pytest.mark.parametrize("by", ["gpu", "count"])
def test_free_counts_are_a_count_bound(gpus, tasks, extra, fits, by):
    counts = FreeCounts(cluster(), make_job("j1", gpus=gpus // tasks, tasks=tasks), "A100-80GB")
    if by == "gpu":
        for node, held_gpus in extra.items():
            counts.free_too(node, held_gpus)
    else:  # the per-node sums `preempt.could_fit` adds up
        counts.count_free({node: len(held_gpus) for node, held_gpus in extra.items()})
    assert counts.possible() is fits
