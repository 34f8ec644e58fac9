"""The openb loaders on invented rows, and the packing replay on tiny generated clusters."""

from __future__ import annotations

import numpy as np
import pytest

from gpuyard.scheduler.fragmentation import PodShape
from gpuyard.sim.openb import OpenbCluster, OpenbNode, OpenbPod, load_openb_nodes, load_openb_pods
from gpuyard.sim.packing import (
    PackingRun,
    alloc_curve,
    compare,
    inflate,
    load_run,
    replay,
    save_run,
)

POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time\n"
)


def test_pods_load_with_cpu_only_shared_and_whole_gpu_pods(tmp_path):
    f = tmp_path / "pods.csv"
    f.write_text(
        POD_HEADER
        + "p-cpu,4000,8192,0,0,,BE,Running,10,20,10\n"
        + "p-share,6000,12288,1,460,,LS,Pending,5,,\n"
        + "p-two,16000,65536,2,1000,,LS,Failed,1,2,1\n"
        + "p-big,1000,10,1,1200,,LS,Running,0,1,0\n"
    )
    pods = load_openb_pods(f)
    assert [p.shape for p in pods] == [
        PodShape(4000, 8192, 0, 0),
        PodShape(6000, 12288, 1, 460),
        PodShape(16000, 65536, 2, 1000),
        PodShape(1000, 10, 1, 1000),  # gpu_milli above 1000 is clipped, as the artifact does
    ]
    assert pods[1].shape.shares_gpu and not pods[3].shape.shares_gpu
    assert pods[1].scheduled_s is None and pods[0].deletion_s == 20.0
    assert [p.shape.total_gpu_milli for p in pods] == [0, 460, 2000, 1000]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("p,lots,1,1,500,,LS,Running,0,1,0", "line 2: cpu_milli='lots' is not a number"),
        ("p,1000,1,1,-5,,LS,Running,0,1,0", "line 2: gpu_milli=-5 must be ≥ 0"),
        ("p,1000,1,2,0,,LS,Running,0,1,0", "line 2: num_gpu=2 with gpu_milli=0"),
        ("p,1000,1,9,1000,,LS,Running,0,1,0", "num_gpu=9 is more than a node has"),
    ],
)
def test_bad_pod_rows_name_line_and_column(tmp_path, row, message):
    f = tmp_path / "pods.csv"
    f.write_text(POD_HEADER + row + "\n")
    with pytest.raises(ValueError, match=message):
        load_openb_pods(f)


def test_nodes_load_and_missing_columns_are_named(tmp_path):
    f = tmp_path / "nodes.csv"
    f.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,96000,393216,8,G2\nn1,64000,262144,2,P100\n")
    cluster = load_openb_nodes(f)
    assert cluster.nodes[1] == OpenbNode("n1", 64000, 262144, 2, "P100")
    assert cluster.total_gpus == 10 and cluster.gpu_milli == 10_000
    f.write_text("sn,cpu_milli,gpu\nn0,1,1\n")
    with pytest.raises(ValueError, match=r"missing columns \['memory_mib', 'model'\]"):
        load_openb_nodes(f)


def test_alloc_curve_by_hand():
    # one GPU (1000 milli); after each pod: arrived 500, 1000, 2000; allocated 500, 500, 1500
    curve = alloc_curve(np.array([500, 1000, 2000]), np.array([500, 500, 1500]), 1)
    assert curve[50] == 50 and curve[100] == 50
    assert curve[49] == 50  # nothing arrived at 49 %: the pods within ±1 % count
    assert np.isnan(curve[10]) and np.isnan(curve[130])


def pods(n):
    shapes = [PodShape(2000, 1000, 1, 500), PodShape(4000, 1000, 1, 1000)]
    shapes += [PodShape(1000, 100, 0, 0), PodShape(2000, 1000, 2, 1000)]
    return tuple(OpenbPod(f"p{i:03d}", shapes[i % 4]) for i in range(n))


CLUSTER = OpenbCluster(
    tuple(OpenbNode(f"n{i}", 16000, 64000, g, "T4") for i, g in enumerate([1, 2, 4, 8]))
)


def test_inflate_grows_the_workload_to_130_percent_of_capacity():
    shapes = inflate(pods(8), CLUSTER.gpu_milli, np.random.default_rng(1), 1.3)
    asked = sum(s.total_gpu_milli for s in shapes)
    assert len(shapes) > 8 and asked <= 1.3 * CLUSTER.gpu_milli
    assert sorted(map(repr, shapes[:8])) == sorted(repr(p.shape) for p in pods(8))


def test_inflate_cuts_a_workload_bigger_than_the_target():
    shapes = inflate(pods(80), CLUSTER.gpu_milli, np.random.default_rng(1), 1.3)
    assert sum(s.total_gpu_milli for s in shapes) <= 1.3 * CLUSTER.gpu_milli


@pytest.mark.parametrize("policy", ["bestfit", "random", "fgd", "fgd-gpu", "fgd-balance"])
def test_replay_is_deterministic_and_never_overfills(policy):
    a, b = (replay(CLUSTER, pods(12), policy, seed=3) for _ in range(2))
    assert np.array_equal(a.used, b.used) and a.failed == b.failed
    assert a.used[-1] <= CLUSTER.gpu_milli
    assert a.arrived[-1] > CLUSTER.gpu_milli  # 130 % arrived, so some pods must fail
    assert a.failed > 0


def test_every_policy_sees_the_same_workload_for_a_seed():
    runs = compare(CLUSTER, pods(12), ["bestfit", "fgd"], [5, 6])
    assert [(r.policy, r.seed) for r in runs] == [
        ("bestfit", 5), ("bestfit", 6), ("fgd", 5), ("fgd", 6)
    ]
    assert np.array_equal(runs[0].arrived, runs[2].arrived)
    assert not np.array_equal(runs[0].arrived, runs[1].arrived)


def test_saved_runs_load_back_and_missing_ones_are_none(tmp_path):
    run = PackingRun("fgd", 7, 3, np.array([500, 1500]), np.array([500, 1000]), 1, 2.5)
    save_run(tmp_path, run)
    back = load_run(tmp_path, "fgd", 7)
    assert back is not None
    assert (back.policy, back.seed, back.total_gpus, back.failed) == ("fgd", 7, 3, 1)
    assert np.array_equal(back.arrived, run.arrived) and np.array_equal(back.used, run.used)
    assert back.seconds == 2.5
    assert load_run(tmp_path, "fgd", 8) is None


def test_compare_keeps_runs_and_reuses_them(tmp_path):
    first = compare(CLUSTER, pods(12), ["bestfit"], [5], runs_dir=tmp_path)
    kept = load_run(tmp_path, "bestfit", 5)
    assert kept is not None and np.array_equal(kept.used, first[0].used)
    # a saved run is loaded, not replayed: a doctored one comes back as saved
    save_run(tmp_path, PackingRun("bestfit", 5, 10, kept.arrived, kept.used * 0, 99, 0.0))
    again = compare(CLUSTER, pods(12), ["bestfit", "fgd"], [5], runs_dir=tmp_path)
    assert again[0].failed == 99 and again[1].policy == "fgd"
    assert load_run(tmp_path, "fgd", 5) is not None
