"""A blocked head's estimated start: running jobs end by their maxRuntime, else by the run
time learned from history; the reason says which the estimate rests on."""

from __future__ import annotations

from dataclasses import replace

import pytest

from builders import make_job, make_node, make_running
from gpuyard.scheduler import ClusterView, Scheduler, SchedulerConfig

N8 = (make_node("n1", gpus=8),)
NOW = 10.0


def running(job_id, gpus, max_runtime_s=None, expected_s=None):
    job = make_running(job_id, "a", "n1", *gpus, max_runtime_s=max_runtime_s, started_at=0)
    return replace(job, expected_runtime_s=expected_s)


def head_reason(jobs, gpus=6):
    view = ClusterView(N8, {}, tuple(jobs), (make_job("j1", gpus),), {}, NOW)
    return Scheduler().cycle(view).pending_reasons["j1"]


LOW, HIGH = (0, 1, 2, 3), (4, 5, 6, 7)
CASES = [
    # (id, running, head GPUs, estimated start, basis)
    (
        "both-by-max-runtime",
        [running("r1", LOW, 300), running("r2", HIGH, 50)],
        6,
        300.0,
        "the run times of 2 running jobs: 2 by maxRuntime",
    ),
    (
        "one-learned",
        [running("r1", LOW, expected_s=200), running("r2", HIGH, 50)],
        6,
        200.0,
        "the run times of 2 running jobs: 1 by maxRuntime, 1 learned from history",
    ),
    (
        "max-runtime-wins-over-learned",
        [running("r1", LOW, 300, expected_s=100), running("r2", HIGH, 50)],
        6,
        300.0,
        "the run times of 2 running jobs: 2 by maxRuntime",
    ),
    (
        "only-the-first-end-needed",
        [running("r1", LOW, expected_s=900), running("r2", HIGH, expected_s=120)],
        4,
        120.0,
        "the run times of 1 running job: 1 learned from history",
    ),
    ("nothing-known", [running("r1", LOW), running("r2", HIGH, 50)], 6, None, None),
    (
        "past-its-learned-run-time",
        [running("r1", LOW, expected_s=5), running("r2", HIGH, 50)],
        6,
        None,
        None,
    ),
]


@pytest.mark.parametrize(
    ("jobs", "gpus", "eta", "basis"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_estimated_start_and_what_it_rests_on(jobs, gpus, eta, basis):
    reason = head_reason(jobs, gpus)
    assert (reason.estimated_start, reason.eta_basis) == (eta, basis)
    if eta is None:
        assert "estimated start" not in reason.message
    else:
        minutes = round((eta - NOW) / 60)
        assert f"estimated start in {minutes} min (from {basis})" in reason.message


def test_a_parked_head_drops_an_estimate_that_has_passed():
    # r1 holds the node; its learned run time says it ends at 1,000. At 1,500 it still runs
    # and nothing was released: the parked head is tried again instead of keeping "soon"
    from_history = replace(
        make_running("r1", "default", "n1", *range(8), started_at=0.0), expected_runtime_s=1_000.0
    )
    scheduler = Scheduler(SchedulerConfig())
    nodes = (make_node("n1", gpus=8),)

    def at(now: float):
        view = ClusterView(nodes, {}, (from_history,), (make_job("j1", 4),), {}, now)
        return scheduler.cycle(view).pending_reasons["j1"]

    assert at(100.0).estimated_start == 1_000.0
    assert at(1_500.0).estimated_start is None
