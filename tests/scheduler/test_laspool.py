"""LAS's victim pool kept across cycles (`laspool.py`) gives, at every time, what working it
out from scratch gives: the jobs above the lowest queue, highest queue first, newest first
there, then in `running` order; and the next time one moves up a queue."""

from __future__ import annotations

import bisect
import random
from dataclasses import replace

import pytest

from builders import make_running
from gpuyard.scheduler.laspool import LevelPool, crossing_times
from gpuyard.scheduler.view import ViewChanges

THRESHOLDS = (3600.0, 36_000.0)


def from_scratch(running, now):
    """The pool as `Las.pool` worked it out before it was kept across cycles."""
    levels = {
        r.job_id: bisect.bisect_right(crossing_times(r, THRESHOLDS), now)
        for r in running
        if r.preemptible and not r.terminating
    }
    pool = [r for r in running if levels.get(r.job_id)]
    pool.sort(key=lambda r: (-levels[r.job_id], -r.started_at))
    later = [
        t
        for r in running
        if r.preemptible and not r.terminating
        for t in crossing_times(r, THRESHOLDS)
        if now < t < float("inf")
    ]
    return [r.job_id for r in pool], min(later, default=float("inf"))


def random_job(rng: random.Random, n: int, now: float):
    r = make_running(
        f"j{n}",
        "t",
        "n1",
        *range(rng.choice((0, 1, 2, 4, 8))),
        started_at=now - rng.choice((0.0, 0.0, 600.0, 5000.0)),
    )
    return replace(
        r,
        attained_gpu_s=rng.choice((0.0, 0.0, 2000.0, 40_000.0)),
        preemptible=rng.random() > 0.1,
    )


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("with_changes", [True, False])
def test_kept_pool_matches_the_pool_from_scratch(seed, with_changes):
    rng = random.Random(seed)
    pool, running, now, n = LevelPool(THRESHOLDS), {}, 0.0, 0
    for cycle in range(60):
        now += rng.choice((0.0, 30.0, 600.0, 3000.0))
        stopped = set(rng.sample(sorted(running), k=min(len(running), rng.randrange(3))))
        for job_id in stopped:
            del running[job_id]
        changed = []
        for job_id in rng.sample(sorted(running), k=min(len(running), rng.randrange(2))):
            running[job_id] = replace(running[job_id], terminating=True)
            changed.append(running[job_id])
        for _ in range(rng.randrange(4)):
            n += 1
            r = random_job(rng, n, now)
            running[r.job_id] = r
            changed.append(r)
        changes = ViewChanges(cycle, stopped=frozenset(stopped), started=tuple(changed))
        view_running = tuple(running.values())
        pool.sync(view_running, changes if with_changes else None, now)
        victims, next_move = from_scratch(view_running, now)
        assert [r.job_id for r in pool.victims(now)] == victims
        assert pool.next_crossing(now) == next_move
