"""The preemptible rows kept across cycles (`victimtable.py`) are, after every cycle's
changes, the rows worked out from the whole running list: the borrowers, the stopping jobs
and every job of the tenants whose own jobs may be stopped, in `running` order."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from builders import make_running
from gpuyard.scheduler.victimtable import VictimTable
from gpuyard.scheduler.view import ViewChanges

SAME_TENANT = frozenset({"own"})


def from_scratch(running):
    """The rows as `Round._preemptible` worked them out before they were kept."""
    return [
        r.job_id
        for r in running
        if r.preemptible and (r.terminating or r.tenant in SAME_TENANT or r.opportunistic)
    ]


def random_job(rng: random.Random, n: int):
    r = make_running(
        f"j{n}",
        rng.choice(("own", "other")),
        "n1",
        *range(rng.choice((1, 2, 4))),
        borrowed=rng.choice((0, 0, 2)),
    )
    return replace(r, preemptible=rng.random() > 0.1)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("with_changes", [True, False])
def test_kept_rows_match_the_rows_from_scratch(seed, with_changes):
    rng = random.Random(seed)
    table, running, n = VictimTable(), {}, 0
    for cycle in range(60):
        stopped = set(rng.sample(sorted(running), k=min(len(running), rng.randrange(3))))
        for job_id in stopped:
            del running[job_id]
        changed = []
        for job_id in rng.sample(sorted(running), k=min(len(running), rng.randrange(3))):
            running[job_id] = replace(running[job_id], terminating=True)  # keeps its place
            changed.append(running[job_id])
        for _ in range(rng.randrange(4)):
            n += 1
            r = random_job(rng, n)
            running[r.job_id] = r
            changed.append(r)
        changes = ViewChanges(cycle, stopped=frozenset(stopped), started=tuple(changed))
        view_running = tuple(running.values())
        table.sync(view_running, changes if with_changes else None, SAME_TENANT)
        if rng.random() < 0.7:  # a cycle without a reclaim does not read the table
            rows = table.rows()
            assert [row[0].job_id for row in rows] == from_scratch(view_running)
            assert all(row[0] is running[row[0].job_id] for row in rows)
