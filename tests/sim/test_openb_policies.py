"""Fragmentation and the packing policies on tiny clusters, answers worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from gpuyard.scheduler.fragmentation import (
    PodShape,
    PodTypeMix,
    fragmentation,
    node_fragmentation,
    pod_type_mix,
    type_stats,
)
from gpuyard.scheduler.sharefit import (
    FreeView,
    Placement,
    cpu_surplus,
    fitting_nodes,
    make_policy,
    mean_cpu_per_gpu_milli,
)

RNG = np.random.default_rng(0)


def mix(*types):
    """types: (cpu, milli per GPU, GPU count, freq)."""
    a = np.array(types, dtype=float)
    return PodTypeMix(a[:, 0].astype(int), a[:, 1].astype(int), a[:, 2].astype(int), a[:, 3])


HALF_AND_WHOLE = mix((1000, 500, 1, 0.5), (1000, 1000, 1, 0.5))


def view(gpus, cpu=8000, memory=64_000, the_mix=HALF_AND_WHOLE, rank=None):
    """`gpus`: per node the free milli-GPU of each GPU."""
    width = max(len(g) for g in gpus)
    gpu = np.array([list(g) + [0] * (width - len(g)) for g in gpus], dtype=np.int64)
    n = len(gpus)
    cpus = np.full(n, cpu, dtype=np.int64)
    stats = type_stats(gpu, the_mix)
    frag = fragmentation(cpus, gpu, the_mix)
    order = np.arange(n) if rank is None else np.array(rank)
    return FreeView(cpus, np.full(n, memory, dtype=np.int64), gpu, order, stats, frag)


@pytest.mark.parametrize(
    ("cpu", "gpus", "expected"),
    [
        # both types fit; the 300 GPU is too small for either: 0.5·300 + 0.5·300
        (8000, [1000, 300], 300.0),
        # neither type fits anywhere: every free milli counts: 600
        (8000, [300, 300], 600.0),
        # a 500-GPU hosts the half type (nothing short), not the whole one (all 1100 lost)
        (8000, [500, 600], 550.0),
        # too little CPU for either type: all free GPU milli is lost
        (500, [1000, 1000], 2000.0),
        # an empty node is not fragmented
        (8000, [1000, 1000], 0.0),
    ],
)
def test_node_fragmentation_by_hand(cpu, gpus, expected):
    assert node_fragmentation(cpu, gpus, HALF_AND_WHOLE) == pytest.approx(expected)


def test_cpu_only_types_count_all_free_gpu_milli():
    # as the FGD artifact: a pod type without GPUs counts every free milli as fragment
    with_cpu = mix((1000, 500, 1, 0.5), (2000, 0, 0, 0.5))
    assert node_fragmentation(8000, [1000, 300], with_cpu) == pytest.approx(0.5 * 300 + 0.5 * 1300)


def test_pod_type_mix_keeps_the_types_covering_95_percent():
    shapes = [PodShape(1000, 1, 1, 500)] * 60 + [PodShape(2000, 1, 0, 0)] * 36
    shapes += [PodShape(4000, 1, 2, 1000)] * 4  # 4 % of the pods: left out
    m = pod_type_mix(shapes)
    assert list(zip(m.cpu, m.milli, m.num, strict=True)) == [(1000, 500, 1), (2000, 0, 0)]
    assert m.freq == pytest.approx([60 / 96, 36 / 96])


SHARE_500 = PodShape(cpu_milli=1000, memory_mib=1000, num_gpu=1, gpu_milli=500)


def test_fgd_takes_the_gpu_that_grows_fragmentation_least():
    # node 0 [1000, 600] (F 300), node 1 [1000, 1000] (F 0). Placing 500:
    #   node 0 GPU 0 → [500, 600]: F 550, +250; node 0 GPU 1 → [1000, 100]: F 100, −200;
    #   node 1 GPU 0 → [500, 1000]: F 250, +250.
    v = view([[1000, 600], [1000, 1000]])
    assert make_policy("fgd", HALF_AND_WHOLE)(v, SHARE_500, RNG) == Placement(0, (1,))


def test_bestfit_takes_the_fullest_node_and_the_tightest_gpu():
    # raw scores ⌊100·(1 − ½·7000/128000 − ½·free_after/8000)⌋: node 0 (1100 left) 90,
    # node 1 (1500 left) 87; on node 0 the 600 GPU is the tightest that holds 500
    v = view([[1000, 600], [1000, 1000]])
    assert make_policy("bestfit", HALF_AND_WHOLE)(v, SHARE_500, RNG) == Placement(0, (1,))


def test_bestfit_and_fgd_disagree_where_best_fit_leaves_a_useless_sliver():
    # one 500-share type. Placing 400: best-fit fills node 0 (600 → 200, a sliver no
    # 500-pod can use: F 0 → 200); FGD keeps it whole and uses node 1 (1000 → 600: F stays 0)
    only_half = mix((1000, 500, 1, 1.0))
    v = view([[600], [1000]], the_mix=only_half)
    pod = PodShape(1000, 1000, 1, 400)
    assert make_policy("bestfit", only_half)(v, pod, RNG) == Placement(0, (0,))
    assert make_policy("fgd", only_half)(v, pod, RNG) == Placement(1, (0,))


@pytest.mark.parametrize("policy", ["bestfit", "fgd", "fgd-gpu", "fgd-exact", "fgd-balance"])
def test_ties_go_to_the_node_ranked_first(policy):
    v = view([[1000, 1000], [1000, 1000], [1000, 1000]], rank=[2, 0, 1])
    assert make_policy(policy, HALF_AND_WHOLE)(v, SHARE_500, RNG).node == 1


def test_fgd_balance_keeps_fgds_choice_when_scores_differ():
    v = view([[1000, 600], [1000, 1000]])  # as above: node 0 GPU 1 shrinks F, the rest grow it
    assert make_policy("fgd-balance", HALF_AND_WHOLE)(v, SHARE_500, RNG) == Placement(0, (1,))


# half-GPU pods with 2 cores, and CPU-only pods: the GPU pods ask 0.5·2000 / (0.5·500) =
# 4 milli-CPU per milli-GPU (4 cores a GPU). Node 0: 8 cores, 1 GPU (surplus 8 − 4 = 4 cores);
# node 1: 16 cores, 1 GPU (surplus 12). Neither pod below changes F by a different amount on
# the two nodes (both keep enough CPU for every type), so FGD's scores tie.
HALF_AND_CPU = mix((2000, 500, 1, 0.5), (4000, 0, 0, 0.5))


def cpu_rich_and_tight(rank):
    v = view([[1000], [1000]], the_mix=HALF_AND_CPU, rank=rank)
    cpu = np.array([8000, 16000])
    frag = fragmentation(cpu, v.gpu, HALF_AND_CPU)
    return FreeView(cpu, v.memory, v.gpu, v.rank, v.stats, frag)


def test_cpu_surplus_by_hand():
    assert mean_cpu_per_gpu_milli(HALF_AND_CPU) == pytest.approx(4.0)
    assert list(cpu_surplus(cpu_rich_and_tight([0, 1]), 4.0)) == [4.0, 12.0]


@pytest.mark.parametrize(
    ("pod", "rank", "fgd_node", "balance_node"),
    [
        # CPU-only: ties go to the node with the most CPU to spare, not the first ranked
        (PodShape(1000, 1000, 0, 0), [0, 1], 0, 1),
        # 1 core for half a GPU (2 per GPU, below the mix's 4): to the CPU-tight node
        (PodShape(1000, 1000, 1, 500), [1, 0], 1, 0),
        # 3 cores for half a GPU (6 per GPU): CPU-heavy, to the CPU-rich node
        (PodShape(3000, 1000, 1, 500), [0, 1], 0, 1),
    ],
)
def test_fgd_balance_breaks_ties_by_cpu_balance(pod, rank, fgd_node, balance_node):
    v = cpu_rich_and_tight(rank)
    assert make_policy("fgd", HALF_AND_CPU)(v, pod, RNG).node == fgd_node
    assert make_policy("fgd-balance", HALF_AND_CPU)(v, pod, RNG).node == balance_node


def test_fgd_balance_keeps_nodes_with_only_whole_free_gpus_for_last():
    # a CPU-only pod changes F nowhere. By surplus it would go to node 0 (8 − 4·1 = 4 cores
    # against 8 − 4·1.5 = 2), as FGD's rank does, but node 0's free GPUs are all whole
    v = view([[1000, 0], [1000, 500]], the_mix=HALF_AND_CPU)
    cpu_only = PodShape(1000, 1000, 0, 0)
    assert list(cpu_surplus(v, 4.0)) == [4.0, 2.0]
    assert make_policy("fgd", HALF_AND_CPU)(v, cpu_only, RNG).node == 0
    assert make_policy("fgd-balance", HALF_AND_CPU)(v, cpu_only, RNG).node == 1


def test_whole_gpus_never_land_on_a_shared_gpu():
    v = view([[1000, 900], [900, 900]])
    two = PodShape(1000, 1000, 2, 1000)
    one = PodShape(1000, 1000, 1, 1000)
    assert list(fitting_nodes(v, two)) == []
    assert list(fitting_nodes(v, one)) == [0]
    for policy in ("bestfit", "random", "fgd"):
        assert make_policy(policy, HALF_AND_WHOLE)(v, one, RNG) == Placement(0, (0,))
        assert make_policy(policy, HALF_AND_WHOLE)(v, two, RNG) is None


def test_cpu_and_memory_limit_where_a_pod_fits():
    v = view([[1000], [1000]])
    v = FreeView(np.array([500, 8000]), np.array([64_000, 10]), v.gpu, v.rank, v.stats, v.frag)
    assert list(fitting_nodes(v, SHARE_500)) == []
    assert list(fitting_nodes(v, PodShape(400, 10, 0, 0))) == [0, 1]


def test_random_is_deterministic_for_a_seed_and_only_picks_fitting_gpus():
    v = view([[1000, 100, 600], [100, 100, 100], [500, 1000, 1000]])
    pick = make_policy("random", HALF_AND_WHOLE)
    runs = [[pick(v, SHARE_500, np.random.default_rng(7)) for _ in range(3)] for _ in range(2)]
    assert runs[0] == runs[1]
    seen = {pick(v, SHARE_500, np.random.default_rng(s)) for s in range(200)}
    assert all(v.gpu[p.node, p.gpus[0]] >= 500 for p in seen)
    assert {p.node for p in seen} == {0, 2}


def test_unknown_policy_names_the_choices():
    with pytest.raises(ValueError, match="bestfit, random, fgd"):
        make_policy("worstfit", HALF_AND_WHOLE)
