"""The discrete-event simulator: a trace replayed through the unchanged scheduler.

Time is a `ManualClock`. Events, in this order at equal times: completions, preempted jobs
that stopped, arrivals. After the events of one instant, if jobs are queued, one scheduling
cycle runs (the live controller is woken by such changes too); while jobs wait, a cycle also
runs every `cycle_s` of simulated time. Like the controller, no cycle runs when the queue is
empty. Each cycle builds a `ClusterView` as `controller/view.py` does and applies the
`CycleResult` as `controller/loop.py` does: preemptions first (SIGTERM; the victim stops
`grace_s` later), then admissions (the job starts at once and runs its remaining time).
A periodic cycle is skipped when the last cycle decided nothing, no event happened since, and
the policy says nothing can change before then (`Scheduler.quiet_until`): such a cycle would
decide nothing either (`SimResult.quiet_cycles` counts them; `skip_quiet=False` runs them).

A preempted job keeps the work up to its last checkpoint: checkpoints happen every
`checkpoint_s` of run time from a per-job phase drawn from the seed; the rest is lost. It is
requeued as a new attempt (queued at the stop time, attained GPU-seconds carried).

With `jitter_s` > 0 each arrival is first moved later by a seeded offset (`traces.jittered`).
Jobs whose trace names a user get a run-time estimate when they arrive, from the run times of
the jobs that ended before (`RuntimeEstimator`, as the controller does live); it and the
preemption count so far go into each `JobDemand` and `RunningJob`.
"""

from __future__ import annotations

import gc
import heapq
import math
import random
import time
from dataclasses import dataclass, field, replace
from typing import Protocol

from gpuyard.model import JobPlacement, ManualClock, QueuePolicy, RunningJob, Tenant
from gpuyard.model.value import Value
from gpuyard.scheduler import (
    Admission,
    ClusterView,
    CycleResult,
    Preemption,
    Scheduler,
    SchedulerConfig,
)
from gpuyard.scheduler.estimates import RuntimeEstimator
from gpuyard.scheduler.view import ViewChanges
from gpuyard.sim.cluster import build_nodes, build_tenants, demand
from gpuyard.sim.traces import Trace, TraceJob, jittered

END, STOP, ARRIVE = 0, 1, 2


@dataclass(frozen=True, slots=True)
class SimConfig(Value):  # Value: it pickles compiled too (`--seeds` sends it to workers)
    policy: str = "default"
    cycle_s: float = 60.0
    checkpoint_s: float = 1800.0  # 0: a job checkpoints when told to stop, nothing is lost
    grace_s: int = 30
    seed: int = 0
    tenant_queue: QueuePolicy = Tenant("").queue_policy  # the tenants' queue (`default`)
    aging_s: float = SchedulerConfig().aging_s
    # SchedulerConfig flags of `default` (scheduler/view.py), on by default as there
    tenant_backfill: bool = SchedulerConfig().tenant_backfill
    tenant_preemption: bool = SchedulerConfig().tenant_preemption
    least_served_first: bool = SchedulerConfig().least_served_first
    # skip periodic cycles the policy says cannot decide anything (exact: a cycle that
    # decides nothing leaves the scheduler's snapshot as it found it; docs/sim.md)
    skip_quiet: bool = True
    # arrivals moved later by a uniform offset in [0, jitter_s) drawn from the seed (0: none)
    jitter_s: float = 0.0


@dataclass(slots=True)
class SimJob:
    """One trace job through its attempts."""

    trace: TraceJob
    seq: int
    phase_s: float
    attempt: int = 1
    done_s: float = 0.0  # checkpointed run time
    attained_gpu_s: float = 0.0
    first_start: float | None = None
    end: float | None = None
    started_at: float = 0.0
    preemptions: int = 0
    lost_gpu_s: float = 0.0
    placement: tuple = ()  # the tasks' placements of the first attempt
    expected_s: float | None = None  # run-time estimate when it arrived (None: no history)

    @property
    def remaining_s(self) -> float:
        return self.trace.duration_s - self.done_s


class Policy(Protocol):
    """What the simulator runs its cycles through: a `Scheduler` (or a test's wrapper of
    one; a `quiet_until(view)` method, if it has one, lets quiet cycles be skipped)."""

    def cycle(self, view: ClusterView) -> CycleResult: ...


@dataclass(slots=True)
class SimResult:
    trace: Trace
    config: SimConfig
    jobs: list[SimJob]
    alloc: list[tuple[float, int]]  # (time, GPUs allocated) at each change
    tenant_gpu_s: dict[str, float]
    capacity: int
    cycles: int = 0
    wall_s: float = 0.0
    scheduler_s: float = 0.0
    unfinished: list[str] = field(default_factory=list)
    quiet_cycles: int = 0  # periodic cycles skipped: nothing changed, nothing could (below)
    cpu_s: float = 0.0  # process CPU time of the replay


class Simulator:
    def __init__(
        self, trace: Trace, config: SimConfig | None = None, scheduler: Policy | None = None
    ) -> None:
        c = self.config = config or SimConfig()
        self.trace = trace = with_jitter(trace, c)
        self.clock = ManualClock(0.0)
        self.nodes = build_nodes(trace)
        self.tenants = build_tenants(trace, c.tenant_queue, c.grace_s)
        self.scheduler: Policy = scheduler or Scheduler(scheduler_config(c))
        rng = random.Random(c.seed)
        self.jobs = {
            j.job_id: SimJob(j, i, rng.uniform(0, c.checkpoint_s) if c.checkpoint_s else 0.0)
            for i, j in enumerate(trace.jobs)
        }
        self.queued: dict = {}  # job id → JobDemand of its current attempt
        self.touched: dict[str, None] = {}  # jobs that joined or left the queue since a view
        self.moved: dict[str, None] = {}  # jobs that started, changed or stopped since a view
        self.running: dict[str, RunningJob] = {}
        self.events: list[tuple[float, int, int, str, int]] = []
        self._n = 0
        self.allocated = 0
        self.alloc: list[tuple[float, int]] = [(0.0, 0)]
        self.tenant_gpu_s: dict[str, float] = {t: 0.0 for t in self.tenants}
        self.cycles, self.scheduler_s = 0, 0.0
        self.quiet_until, self.quiet_cycles = -math.inf, 0
        self.estimator = RuntimeEstimator()
        for j in trace.jobs:
            self._push(j.submit_s, ARRIVE, j.job_id, 1)

    def run(self) -> SimResult:
        """Replay the trace. The objects that exist before it (the trace, earlier results a
        benchmark keeps) are frozen out of the garbage collector's scans meanwhile: the
        replay creates millions of short-lived objects, and each full collection would walk
        them all again (8 % of a replay after two others kept in memory, 2026-11-22)."""
        if gc.get_freeze_count():  # the caller froze some already: leave it to them
            return self._replay()
        gc.freeze()
        try:
            return self._replay()
        finally:
            gc.unfreeze()

    def _replay(self) -> SimResult:
        began, cpu = time.perf_counter(), time.process_time()
        last_cycle = -math.inf
        while True:
            t = self.events[0][0] if self.events else math.inf
            if self.queued:
                t = min(t, last_cycle + self.config.cycle_s)
            if t == math.inf:
                break
            self.clock.set(t)
            quiet = t < self.quiet_until
            while self.events and self.events[0][0] <= t:
                self._handle(*heapq.heappop(self.events))
                quiet = False
            if self.queued:
                last_cycle = t
                if quiet:
                    self.quiet_cycles += 1
                    continue
                if not self._cycle() and not self.events:
                    break  # idle cluster, nothing can start: never will
        return self._result(time.perf_counter() - began, time.process_time() - cpu)

    # ---- events ------------------------------------------------------------------------

    def _push(self, t: float, kind: int, job_id: str, attempt: int) -> None:
        self._n += 1
        heapq.heappush(self.events, (t, kind, self._n, job_id, attempt))

    def _handle(self, t: float, kind: int, _n: int, job_id: str, attempt: int) -> None:
        job = self.jobs[job_id]
        if kind == ARRIVE:
            tj = job.trace
            known = self.estimator.estimate(tj.tenant, tj.user, tj.name)
            job.expected_s = None if known is None else known.seconds
            self._enqueue(job, t)
        elif job.attempt == attempt and job_id in self.running:
            self._finish(job, t) if kind == END else self._stopped(job, t)

    def _enqueue(self, job: SimJob, t: float) -> None:
        self.touched[job.trace.job_id] = None
        self.queued[job.trace.job_id] = demand(
            job.trace,
            job.seq,
            self.trace.gpus_per_node,
            t,
            job.attained_gpu_s,
            job.remaining_s,
            job.expected_s,
            job.preemptions,
        )

    def _release(self, job: SimJob, t: float) -> float:
        r = self.running.pop(job.trace.job_id)
        self.moved[job.trace.job_id] = None
        ran = t - job.started_at
        self.allocated -= r.gpus
        self.alloc.append((t, self.allocated))
        self.tenant_gpu_s[job.trace.tenant] += r.gpus * ran
        job.attained_gpu_s += r.gpus * ran
        return ran

    def _finish(self, job: SimJob, t: float) -> None:
        self._release(job, t)
        job.done_s, job.end = job.trace.duration_s, t
        tj = job.trace
        self.estimator.observe(tj.tenant, tj.user, tj.name, tj.duration_s)

    def _stopped(self, job: SimJob, t: float) -> None:
        ran = self._release(job, t)
        saved = self._checkpointed(job, ran)
        job.done_s += saved
        job.lost_gpu_s += (ran - saved) * job.trace.gpus
        job.preemptions += 1
        job.attempt += 1
        self._enqueue(job, t)

    def _checkpointed(self, job: SimJob, ran: float) -> float:
        every = self.config.checkpoint_s
        if every <= 0:
            return ran
        if ran < job.phase_s:
            return 0.0
        return job.phase_s + (ran - job.phase_s) // every * every

    # ---- cycles ------------------------------------------------------------------------

    def _cycle(self) -> bool:
        now = self.clock.now()
        view = ClusterView(
            nodes=self.nodes,
            tenants=self.tenants,
            running=tuple(self.running.values()),
            queued=tuple(self.queued.values()),
            now=now,
            number=self.cycles + 1,
            changes=self._changes(),
        )
        began = time.perf_counter()
        result = self.scheduler.cycle(view)
        self.scheduler_s += time.perf_counter() - began
        self.cycles += 1
        for p in result.preempt:
            self._preempt(p, now)
        for placement, admission in zip(result.admit, result.admissions, strict=True):
            self._start(placement, admission, now)
        decided = bool(result.admit or result.preempt)
        self.quiet_until = -math.inf if decided else self._quiet_until(view)
        return decided

    def _quiet_until(self, view: ClusterView) -> float:
        """After a cycle that decided nothing: until when the periodic cycles may be skipped
        while no event happens, as the policy says (`quiet_until`; a scheduler without that
        hint is never skipped). Skipped cycles would decide nothing, so results are the
        same, and the grid of periodic cycles is kept (docs/benchmarks.md, Replay speed)."""
        hint = getattr(self.scheduler, "quiet_until", None)
        if not self.config.skip_quiet or hint is None:
            return -math.inf
        return hint(view)

    def _changes(self) -> ViewChanges:
        """What changed since the last cycle's view, so that the scheduler's work follows the
        changes rather than the length of the queue (docs/sim.md)."""
        touched, queued, moved, running = self.touched, self.queued, self.moved, self.running
        joined = tuple(queued[j] for j in touched if j in queued)
        started = tuple(running[j] for j in moved if j in running)
        stopped = frozenset(j for j in moved if j not in running)
        self.touched, self.moved = {}, {}
        return ViewChanges(self.cycles, frozenset(touched), joined, stopped, started)

    def _preempt(self, p: Preemption, now: float) -> None:
        r = self.running.get(p.job_id)
        if r is None or r.terminating:
            return
        self.running[p.job_id] = replace(r, terminating=True)
        self.moved[p.job_id] = None
        self._push(now + p.grace_s, STOP, p.job_id, self.jobs[p.job_id].attempt)

    def _start(self, placement: JobPlacement, admission: Admission, now: float) -> None:
        job = self.jobs[placement.job_id]
        del self.queued[placement.job_id]
        self.touched[placement.job_id] = None
        remaining = job.remaining_s
        r = RunningJob(
            job.trace.job_id,
            job.trace.tenant,
            placement.tasks,
            now,
            borrowed=admission.borrowed,
            attained_gpu_s=job.attained_gpu_s,
            oracle_end_at=now + remaining,
            expected_runtime_s=job.expected_s,
            preemptions=job.preemptions,
        )
        self.running[job.trace.job_id] = r
        self.moved[job.trace.job_id] = None
        self.allocated += r.gpus
        self.alloc.append((now, self.allocated))
        job.started_at = now
        if job.first_start is None:
            job.first_start, job.placement = now, placement.tasks
        self._push(now + remaining, END, job.trace.job_id, job.attempt)

    def _result(self, wall_s: float, cpu_s: float) -> SimResult:
        capacity = sum(len(n.gpus) for n in self.nodes)
        return SimResult(
            self.trace,
            self.config,
            list(self.jobs.values()),
            self.alloc,
            self.tenant_gpu_s,
            capacity,
            self.cycles,
            wall_s,
            self.scheduler_s,
            sorted(j for j, s in self.jobs.items() if s.end is None),
            self.quiet_cycles,
            cpu_s,
        )


def with_jitter(trace: Trace, c: SimConfig) -> Trace:
    """The trace with its arrivals jittered as `c` says (once: a trace jittered already, as
    `report.compare` does before the private runs, must have been jittered the same way)."""
    if c.jitter_s <= 0:
        return trace
    if trace.jitter is None:
        return jittered(trace, c.seed, c.jitter_s)
    if trace.jitter != (c.seed, c.jitter_s):
        raise ValueError(f"trace jittered as {trace.jitter}, config says {(c.seed, c.jitter_s)}")
    return trace


def scheduler_config(c: SimConfig) -> SchedulerConfig:
    return SchedulerConfig(
        aging_s=c.aging_s,
        policy=c.policy,
        tenant_backfill=c.tenant_backfill,
        tenant_preemption=c.tenant_preemption,
        least_served_first=c.least_served_first,
        explain=False,  # nobody reads a replay's pending messages; decisions are the same
    )


def simulate(trace: Trace, config: SimConfig | None = None) -> SimResult:
    return Simulator(trace, config).run()
