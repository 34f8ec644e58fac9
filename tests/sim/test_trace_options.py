"""Trace options of issue 16: `--jitter` (0 keeps the numbers as they were), `--one-tenant`
(every job in one tenant, quotas of the merged trace), and run-time estimates replayed from a
CSV that names users and jobs (filled into every demand and running job, with the preemption
count)."""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass, field

import pytest
from test_sim import random_trace, tiny

from gpuyard.scheduler import ClusterView, CycleResult, Scheduler, SchedulerConfig
from gpuyard.sim import SimConfig, Simulator, load_csv, simulate
from gpuyard.sim.command import load_trace
from gpuyard.sim.metrics import summarize
from gpuyard.sim.traces import jittered, one_tenant, with_quotas

# avg and p99 JCT of a loaded generated trace (`random_trace(4, 200, mean_gap_s=30,
# quotas="demand:1.5")`, seed 7), as the simulator gave them before jitter and estimates
# existed (commit d55dcf4): policies that neither preempt nor read anything new
BEFORE = {
    "fifo-backfill": (2571.5744090215785, 6468.009374316218),
    "sjf-oracle": (2404.0552130877277, 7626.367914473405),
}


@pytest.mark.parametrize("policy", sorted(BEFORE))
def test_no_jitter_gives_the_numbers_of_before(policy):
    trace = random_trace(4, 200, mean_gap_s=30, quotas="demand:1.5")
    s = summarize(simulate(trace, SimConfig(policy=policy, seed=7)))
    assert (s.avg_jct_s, s.p99_jct_s) == BEFORE[policy]


def test_checkpoint_phases_are_drawn_as_before_whatever_the_jitter():
    trace = random_trace(4, 50)
    rng = random.Random(7)
    before = [rng.uniform(0, 900) for _ in trace.jobs]
    sim = Simulator(trace, SimConfig(seed=7, checkpoint_s=900))
    assert [j.phase_s for j in sim.jobs.values()] == before
    moved = Simulator(trace, SimConfig(seed=7, checkpoint_s=900, jitter_s=60))
    assert sorted(j.phase_s for j in moved.jobs.values()) == sorted(before)


def test_jitter_moves_each_arrival_later_by_less_than_the_spread():
    trace = random_trace(4, 200)
    moved = jittered(trace, 3, 60.0)
    assert moved.jitter == (3, 60.0) and jittered(trace, 3, 0.0) is trace
    at = {j.job_id: j.submit_s for j in trace.jobs}
    offsets = [j.submit_s - at[j.job_id] for j in moved.jobs]
    assert all(0 <= d < 60 for d in offsets) and statistics.fmean(offsets) == pytest.approx(
        30, abs=5
    )
    assert [j.submit_s for j in moved.jobs] == sorted(j.submit_s for j in moved.jobs)
    assert moved.jobs == jittered(trace, 3, 60.0).jobs != jittered(trace, 4, 60.0).jobs
    with pytest.raises(ValueError, match="jittered"):
        simulate(moved, SimConfig(seed=4, jitter_s=60))  # jittered once, and as the config says


def test_one_tenant_merges_the_jobs_and_sizes_the_quota_on_the_merged_trace():
    trace = random_trace(4, 200)  # tenants a, b, c at demand:0.7
    merged = one_tenant(trace, "demand:0.95")
    assert {j.tenant for j in merged.jobs} == {"all"} and len(merged.jobs) == len(trace.jobs)
    assert [j.job_id for j in merged.jobs] == [j.job_id for j in trace.jobs]
    assert merged.quota_nodes == with_quotas(merged, "demand:0.95", None).quota_nodes
    assert list(merged.quota_nodes) == [("all", "GPU")]
    helios_like = one_tenant(
        tiny([("x", 0, 9, 1, "a"), ("y", 0, 9, 1, "b")], {"a": 3, "b": 2}), "helios"
    )
    assert helios_like.quota_nodes == {("all", "GPU"): 5}  # fixed sizes: added up


def test_load_trace_one_tenant_from_csv(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("submit_time,duration,num_gpus,tenant\n0,3600,8,a\n36000,3600,8,b\n")
    assert load_trace(f"csv:{path}", tmp_path, "demand:0.95").total_nodes == 2  # one each
    trace = load_trace(f"csv:{path}", tmp_path, "demand:0.95", merged=True)
    assert trace.tenants == ["all"] and trace.total_nodes == 1


def write_users_csv(path, n: int = 300):
    """Synthetic: 4 users, each with 3 job names whose run times vary ±20 % around their own
    typical length (no public trace names users: this stands in for one)."""
    rng = random.Random(9)
    typical = {(u, k): rng.choice([600, 1800, 7200, 14400]) for u in range(4) for k in range(3)}
    rows, t = ["submit_time,duration,num_gpus,tenant,gpu_type,user,name"], 0.0
    for _ in range(n):
        t += rng.expovariate(1 / 300)
        u, k = rng.randrange(4), rng.randrange(3)
        d = typical[u, k] * rng.uniform(0.8, 1.2)
        rows.append(f"{t:.1f},{d:.1f},{rng.choice([1, 2, 8])},t{u % 2},,user{u},job{k}")
    rows.append(f"{t + 1:.1f},100,1,t0,,,")  # a job without user or name
    path.write_text("\n".join(rows) + "\n")
    return path


def test_csv_user_and_name_are_read_and_optional(tmp_path):
    trace = load_csv(write_users_csv(tmp_path / "u.csv", 20))
    assert all(j.user and j.name for j in trace.jobs[:-1])
    assert (trace.jobs[-1].user, trace.jobs[-1].name) == (None, None)
    plain = random_trace(1, 5)
    assert all(j.user is None and j.name is None for j in plain.jobs)


@dataclass
class Recorder:
    """A `Scheduler` that remembers the demands and running jobs it was shown."""

    inner: Scheduler
    demands: dict = field(default_factory=dict)
    running: dict = field(default_factory=dict)

    def cycle(self, view: ClusterView) -> CycleResult:
        for d in view.queued:
            self.demands.setdefault(d.job_id, []).append(d)
        for r in view.running:
            self.running.setdefault(r.job_id, []).append(r)
        return self.inner.cycle(view)


def test_estimates_are_learned_from_jobs_that_ended_and_filled_in(tmp_path):
    trace = load_csv(write_users_csv(tmp_path / "u.csv"))
    rec = Recorder(Scheduler(SchedulerConfig(policy="fifo-backfill", explain=False)))
    result = Simulator(trace, SimConfig(policy="fifo-backfill"), rec).run()
    done = sorted(result.jobs, key=lambda j: j.end)
    for job in result.jobs:
        t = job.trace
        mine = [
            d.trace
            for d in done
            if d.end <= t.submit_s
            and d.trace.user is not None
            and (d.trace.tenant, d.trace.user) == (t.tenant, t.user)
        ]
        same = [d.duration_s for d in mine if d.name == t.name]
        if t.user is None or not mine:
            assert job.expected_s is None
        else:  # the median of the last 20 of the same name, else of the user's last 50
            runs = same[-20:] or [d.duration_s for d in mine][-50:]
            assert job.expected_s == pytest.approx(statistics.median(runs))
        assert {d.expected_runtime_s for d in rec.demands.get(t.job_id, [])} <= {job.expected_s}
        assert {r.expected_runtime_s for r in rec.running.get(t.job_id, [])} <= {job.expected_s}
    s = summarize(result)
    assert any(r.expected_runtime_s for runs in rec.running.values() for r in runs)
    assert 0 < s.estimated < len(trace.jobs)
    assert s.estimate_within_2x > 0.8 and s.estimate_median_err < 0.3  # ±20 % around a typical


def test_philly_like_traces_without_users_get_no_estimate():
    s = summarize(simulate(random_trace(1, 50)))
    assert s.estimated == 0 and all(
        j.expected_s is None for j in simulate(random_trace(1, 50)).jobs
    )


def test_demands_and_running_jobs_carry_the_preemption_count():
    # long is preempted by short (SRTF) at 50, requeued, and restarts: its second attempt's
    # demand and running job say 1 preemption (huge never fits: cycles run while long does)
    jobs = [("long", 0, 100, 1, "a"), ("short", 50, 10, 1, "a"), ("huge", 70, 10, 2, "a")]
    trace = tiny(jobs, {"a": 1})
    rec = Recorder(Scheduler(SchedulerConfig(policy="srtf-oracle", explain=False)))
    Simulator(trace, SimConfig(policy="srtf-oracle", grace_s=5, checkpoint_s=0), rec).run()
    assert sorted({d.preemptions for d in rec.demands["long"]}) == [0, 1]
    assert sorted({r.preemptions for r in rec.running["long"]}) == [0, 1]
    assert {d.preemptions for d in rec.demands["short"]} == {0}
