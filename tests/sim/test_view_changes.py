"""`ClusterView.changes`: a scheduler that follows the simulator's changes decides exactly as
one that compares the whole queue and running list every cycle (the controller's way), and
changes that do not follow the last view, or do not add up, fall back to the comparison."""

from __future__ import annotations

from dataclasses import replace

import pytest
from test_sim import random_trace

from gpuyard.model import QueuePolicy
from gpuyard.scheduler import ClusterView, CycleResult, Scheduler
from gpuyard.scheduler.view import ViewChanges
from gpuyard.sim import SimConfig
from gpuyard.sim.engine import Simulator, scheduler_config


class Twin:
    """Runs every view through a scheduler with the changes and one without, and records
    whether they decided the same (admissions with placements, preemptions)."""

    def __init__(self, config: SimConfig, mangle=None) -> None:
        self.follows = Scheduler(scheduler_config(config))
        self.compares = Scheduler(scheduler_config(config))
        self.mangle = mangle or (lambda view: view)
        self.cycles = self.differ = self.with_changes = 0

    def cycle(self, view: ClusterView) -> CycleResult:
        a = self.follows.cycle(self.mangle(view))
        b = self.compares.cycle(replace(view, changes=None))
        self.cycles += 1
        self.with_changes += view.changes is not None
        self.differ += (a.admit, a.preempt, a.admissions) != (b.admit, b.preempt, b.admissions)
        return a


CONFIGS = [
    SimConfig(policy="default"),
    SimConfig(
        policy="default",
        tenant_queue=QueuePolicy.LAS,
        tenant_backfill=True,
        tenant_preemption=True,
        aging_s=600,
    ),
    SimConfig(policy="las", checkpoint_s=300),
    SimConfig(policy="srtf-oracle"),
    SimConfig(policy="fifo"),
    SimConfig(policy="fifo-backfill"),
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.policy)
def test_following_the_changes_decides_as_comparing_everything(config):
    twin = Twin(config)
    result = Simulator(random_trace(3, n=400), config, twin).run()
    assert twin.cycles > 100 and twin.with_changes == twin.cycles
    assert twin.differ == 0
    assert not result.unfinished


def skip_a_number(view: ClusterView) -> ClusterView:
    return replace(view, changes=replace(view.changes, since=view.changes.since - 1))


def drop_what_joined(view: ClusterView) -> ClusterView:
    return replace(view, changes=replace(view.changes, joined=(), started=()))


@pytest.mark.parametrize("mangle", [skip_a_number, drop_what_joined])
def test_changes_that_do_not_follow_or_add_up_fall_back_to_comparing(mangle):
    config = SimConfig(policy="default")
    twin = Twin(config, mangle)
    Simulator(random_trace(4, n=200), config, twin).run()
    assert twin.differ == 0


def test_changes_name_what_joined_left_started_and_stopped():
    config = SimConfig(policy="fifo-backfill")
    seen: list[ViewChanges] = []

    class Recorder:  # wraps the scheduler (it may be compiled: no subclass)
        def __init__(self, scheduler: Scheduler) -> None:
            self.scheduler = scheduler

        def cycle(self, view: ClusterView) -> CycleResult:
            seen.append(view.changes)
            return self.scheduler.cycle(view)

    Simulator(random_trace(5, n=50), config, Recorder(Scheduler(scheduler_config(config)))).run()
    assert [c.since for c in seen] == list(range(len(seen)))
    first = seen[0]
    assert [d.job_id for d in first.joined] == ["j0000"] and first.left == {"j0000"}
    assert not first.started and not first.stopped
    assert [r.job_id for r in seen[1].started] == ["j0000"]  # admitted by the first cycle
    assert any(c.stopped for c in seen)
