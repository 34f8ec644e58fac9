"""Seeds (issue 16): `--seeds` parses ranges and lists; each (policy, seed) run in a process of
its own gives the numbers a run of that seed alone gives; the seed table shows mean ± std and
how often tenants were worse off; `fifo-private` is the tenants' private runs merged."""

from __future__ import annotations

import csv
import math
from dataclasses import asdict, replace

import pytest
from rich.console import Console
from test_sim import random_trace

from gpuyard.sim import SimConfig, simulate
from gpuyard.sim.metrics import Summary, queueing_by_tenant, summarize
from gpuyard.sim.private import merged_alloc, private_result
from gpuyard.sim.report import compare
from gpuyard.sim.seeds import parse_seeds, run_seeds
from gpuyard.sim.seedtable import ratio, seed_table, spread, worse_off, write_seed_rows

TIMING = {"replay_s", "replay_cpu_s"}
POLICIES = ["fifo-quota", "las", "srtf-oracle"]


def numbers(s: Summary) -> dict:
    """Its fields but the replay times (NaN as None: NaN is not equal to itself)."""
    values = asdict(s).items()
    return {k: None if isnan(v) else v for k, v in values if k not in TIMING}


def isnan(v: object) -> bool:
    return isinstance(v, float) and math.isnan(v)


def loaded(seed: int = 4):
    return random_trace(seed, 150, mean_gap_s=30, quotas="demand:1.5")


@pytest.mark.parametrize(
    ("text", "seeds"),
    [("0-4", [0, 1, 2, 3, 4]), ("0,3,7", [0, 3, 7]), ("5", [5]), ("2-3,9,3", [2, 3, 9])],
)
def test_seeds_parse(text, seeds):
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize("text", ["", "4-2", "a", "1-", "-3"])
def test_bad_seeds_are_refused(text):
    with pytest.raises(ValueError, match="--seeds"):
        parse_seeds(text)


def test_seeds_in_parallel_give_the_numbers_of_each_seed_alone():
    trace = loaded()
    base = SimConfig(checkpoint_s=600, jitter_s=60)
    parallel = run_seeds(trace, POLICIES, base, [0, 1, 2], jobs=2)
    sequential = run_seeds(trace, POLICIES, base, [0, 1, 2], jobs=1)
    assert [(r.policy, r.seed) for r in parallel] == [
        (p, s) for p in ["fifo-private", *POLICIES] for s in (0, 1, 2)
    ]
    assert [numbers(r.summary) for r in parallel] == [numbers(r.summary) for r in sequential]
    for seed in (0, 1, 2):  # and what the one-seed path (`compare`) gives for that seed
        alone = compare(trace, POLICIES, replace(base, seed=seed))
        mine = [r.summary for r in parallel if r.seed == seed and r.policy != "fifo-private"]
        assert [numbers(s) for s in mine] == [numbers(s) for s in alone.summaries]
        assert [t.queue_private_s for t in mine[0].tenants] == [
            alone.private.get(t) for t in trace.tenants
        ]


def test_lossless_seeds_differ_only_by_their_jitter():
    trace = loaded()
    lossless = SimConfig(policy="las", checkpoint_s=0, grace_s=0)
    runs = run_seeds(trace, ["las"], lossless, [0, 1, 2], jobs=1)
    same = {r.summary.avg_jct_s for r in runs if r.policy == "las"}
    assert len(same) == 1  # no jitter: the seed draws only checkpoint phases, unused here
    runs = run_seeds(trace, ["las"], replace(lossless, jitter_s=60), [0, 1, 2], jobs=1)
    assert len({r.summary.avg_jct_s for r in runs if r.policy == "las"}) == 3


def test_the_seed_table_and_its_csv(tmp_path):
    runs = run_seeds(loaded(), ["fifo-quota", "las"], SimConfig(jitter_s=60), [0, 1], jobs=1)
    console = Console(width=220, record=True)
    console.print(seed_table(runs, "loaded"))
    text = console.export_text()
    las = [r.summary.avg_jct_s / 3600 for r in runs if r.policy == "las"]
    assert spread(las).show() in text and "±" in text
    assert "fifo-private ÷ this" in text and "fifo-quota ÷ this" in text
    gain = ratio(runs, "fifo-quota", "las", lambda s: s.avg_jct_s)
    assert gain.n == 2 and gain.show() in text
    path = write_seed_rows(tmp_path / "rows.csv", runs, {"config": "X"})
    write_seed_rows(path, runs[:1], {"config": "Y"})
    with path.open() as f:
        rows = list(csv.DictReader(f))
    assert [(r["config"], r["policy"], r["seed"]) for r in rows][-2:] == [
        ("X", "las", "1"),
        ("Y", "fifo-private", "0"),
    ]
    assert len(rows) == len(runs) + 1


def test_worse_off_says_the_worst_seed_and_how_often():
    runs = run_seeds(loaded(), ["fifo-quota"], SimConfig(jitter_s=60), [0, 1], jobs=1)
    assert worse_off([r for r in runs if r.policy == "fifo-private"]) == "0/3 in every seed"
    row = runs[-1].summary.tenants[0]
    bad = replace(runs[-1].summary, tenants=(replace(row, queue_private_s=-10.0),))
    mixed = [runs[-2], replace(runs[-1], summary=bad)]
    assert worse_off(mixed) == "max 1/3, in 1 of 2 seeds"


def test_fifo_private_is_the_private_runs_merged():
    trace, base = loaded(), SimConfig(seed=3, jitter_s=60)
    merged = private_result(trace, base)
    jittered = merged.trace
    ends = {}
    for tenant in trace.tenants:
        alone = simulate(jittered.only(tenant), replace(base, policy="fifo-quota"))
        ends |= {j.trace.job_id: (j.first_start, j.end) for j in alone.jobs}
    assert {j.trace.job_id: (j.first_start, j.end) for j in merged.jobs} == ends
    assert merged.config.policy == "fifo-private"
    assert merged.capacity == trace.total_nodes * trace.gpus_per_node
    s = summarize(merged, queueing_by_tenant(merged))
    jcts = [end - jittered.jobs[i].submit_s for i, (_, end) in enumerate(sorted_by(ends, jittered))]
    assert s.avg_jct_s == pytest.approx(sum(jcts) / len(jcts))
    c = compare(trace, ["fifo-private"], base)  # the column reuses the private runs
    assert numbers(c.summaries[0]) == numbers(s) and c.results[0].jobs == merged.jobs


def sorted_by(ends: dict, trace) -> list:
    return [ends[j.job_id] for j in trace.jobs]


def test_merged_allocation_adds_the_clusters_up():
    a = [(0.0, 0), (10.0, 4), (30.0, 0)]
    b = [(0.0, 0), (10.0, 2), (20.0, 8), (40.0, 0)]
    assert merged_alloc([a, b]) == [(0.0, 0), (10.0, 6), (20.0, 12), (30.0, 8), (40.0, 0)]
