"""How good the run-time estimates (`scheduler/estimates.py`) are on Philly 2017, which has
no user or job-name field: the virtual cluster stands in for the user (a much coarser key:
hundreds of users share a VC) and the job's GPU count for its name.

    .venv/bin/python bench/runtime_estimates.py [--trace-dir DIR]

Replays arrivals in order; a job's run time is learned when it ends (submit + duration, no
queueing: the trace's durations are run times). For each arrival with an estimate: the ratio
estimate / actual. Prints, per key, how many arrivals had an estimate, the share within 2x
and within 10x of the truth, and the median |log2 ratio|. Results: docs/scheduler.md.
"""

from __future__ import annotations

import argparse
import heapq
import math
import statistics
from collections.abc import Callable
from itertools import product

from gpuyard.scheduler.estimates import RuntimeEstimator
from gpuyard.sim.traces import TraceJob, default_trace_dir, load_philly

Key = Callable[[TraceJob], str | None]
KEYS: dict[str, tuple[Key, Key]] = {  # label: (the "user" of a job, its "name")
    "one median for all (baseline)": (lambda j: "all", lambda j: None),
    "VC as user, no name": (lambda j: j.tenant, lambda j: None),
    "VC as user, GPU count as name": (lambda j: j.tenant, lambda j: str(j.gpus)),
}


RUNS = (("all", 0.0), ("≥ 1 h", 3600.0))  # every job, and the jobs that ran an hour or more


def ratios(
    jobs: tuple[TraceJob, ...], user_of: Key, name_of: Key, min_s: float = 0.0
) -> tuple[list[float], int]:
    """estimate / actual for each arrival that had an estimate (of the jobs that ran at least
    `min_s`), and how many had none."""
    est, ends, out, missing = RuntimeEstimator(), [], [], 0
    for i, job in enumerate(jobs):
        while ends and ends[0][0] <= job.submit_s:
            _, k = heapq.heappop(ends)
            done = jobs[k]
            est.observe("t", user_of(done), name_of(done), done.duration_s)
        guess = est.estimate("t", user_of(job), name_of(job))
        if job.duration_s < min_s:
            pass
        elif guess is None:
            missing += 1
        else:
            out.append(guess.seconds / job.duration_s)
        heapq.heappush(ends, (job.submit_s + job.duration_s, i))
    return out, missing


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--trace-dir", default=None)
    args = ap.parse_args()
    trace = load_philly(args.trace_dir or default_trace_dir())
    print(f"{len(trace.jobs)} jobs; {trace.notes[0]}")
    head = f"{'key':32} {'runs':>5} {'estimated':>9} {'within 2x':>9} {'within 10x':>10}"
    print(f"{head} {'med |log2|':>10}")
    for (label, (user_of, name_of)), (runs, min_s) in product(KEYS.items(), RUNS):
        got, missing = ratios(trace.jobs, user_of, name_of, min_s)
        logs = [abs(math.log2(r)) for r in got]
        within2 = sum(1 for x in logs if x <= 1) / len(logs)
        within10 = sum(1 for x in logs if x <= math.log2(10)) / len(logs)
        share = len(got) / (len(got) + missing)
        print(
            f"{label:32} {runs:>5} {share:9.1%} {within2:9.1%} {within10:10.1%} "
            f"{statistics.median(logs):10.2f}"
        )


if __name__ == "__main__":
    main()
