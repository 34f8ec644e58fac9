"""The controller: the loop that drives every job from the store through the engine.

One cycle, in order (each phase loads, does its I/O outside any transaction, then applies):

1. observe   — ask the engine how every active task is doing; record starts and exits
               (exactly once), release what ended;
2. settle    — turn the task ends of each bound job into the job's state: run, succeed,
               retry as a new attempt, fail, stop; once the completion policy decided
               (`lifecycle.py`), stop the tasks still running;
3. enforce   — cancels, `maxRuntime`, idle GPUs (`idle.py`) and interactive jobs without a
               session (`interactive.py`): SIGTERM, a grace period, then SIGKILL;
4. schedule  — snapshot → `scheduler.schedule` → bind in the store → start on the engine.

Each cycle is timed, each first start observes its queueing delay, and each job that ends is
counted and, if its spec names a `webhook`, notified (`webhooks.py`), and its owner mailed if
they asked (`mailer.py`), neither blocking the cycle.

The database is the truth and the engine is told: a decision is written before it is acted
on, so the first cycle after a restart reconciles (adopts live tasks, records exits that
happened while the server was down).
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from gpuyard.controller.dependencies import Gate
from gpuyard.controller.idle import IdleFinding, IdleWatch, UtilizationReader
from gpuyard.controller.interactive import idle_sessions
from gpuyard.controller.launch import (
    DEFAULT_PORT_RANGE,
    build_launch,
    claim_addresses,
    host_network_refused,
    job_peers,
    launch_logins,
    launch_storage,
    reserve_ports,
    storage_refused,
)
from gpuyard.controller.leftovers import LeftoverSweep
from gpuyard.controller.lifecycle import (
    Backoff,
    Outcome,
    Verdict,
    completion_policy,
    decide,
    platform_retry,
    task_end_state,
    unplaced,
)
from gpuyard.controller.logs import TaskLogs
from gpuyard.controller.mailer import MailDispatcher
from gpuyard.controller.mirror import JobMirror
from gpuyard.controller.nodeops import (
    NODE_DRAINED,
    drain_preemptions,
    overdue_drains,
    with_cordons,
)
from gpuyard.controller.prepull import MAX_JOBS, PLAN_INTERVAL_S, PrePuller, warm_targets
from gpuyard.controller.quiet import QuietCycles, inputs
from gpuyard.controller.runtimes import LearnedRuntimes
from gpuyard.controller.sshkeys import with_ssh
from gpuyard.controller.view import ViewBuilder
from gpuyard.controller.webhooks import WebhookDispatcher, job_payload
from gpuyard.engine import AgentUnreachable, Engine, NodeUnavailable
from gpuyard.engine.nodeimages import NodeImageOps
from gpuyard.metrics import Instruments
from gpuyard.model import (
    Clock,
    GpuDevice,
    IdleGpuAction,
    JobPlacement,
    JobState,
    Node,
    TaskReason,
    TaskState,
    Tenant,
)
from gpuyard.runtime.errors import ImageError, LaunchInvalid
from gpuyard.runtime.pulls import retry_of
from gpuyard.runtime.types import TaskLaunch, TaskPeer, TaskPhase, TaskStatus
from gpuyard.scheduler import PendingCode, PendingReason, Scheduler, SchedulerConfig
from gpuyard.spec import JobSpec, parse_job_spec
from gpuyard.store import (
    JobAlreadyEnded,
    JobNotFound,
    JobRecord,
    NewTask,
    Pending,
    PortsExhausted,
    Store,
    TaskRecord,
)

log = logging.getLogger("gpuyard.controller")

NODE_RECORD_INTERVAL_S = 30.0
ROLLUP_INTERVAL_S = 60.0  # how often the usage roll-up accounts the task rows (rollup.py)
ROLLUP_AFTER_END_S = 5.0  # sooner once a job ended, so its use shows within seconds
BACKOFF = "PlatformBackoff"  # the pending code of a job waiting out a platform failure
HELD = "Held"  # the pending code of a job held by `gpuyard hold`
MAX_PARALLEL_STARTS = 8
FULL_POLL_S = 5.0  # every running task's status at least this often, hint or not


class Controller:
    def __init__(
        self,
        store: Store,
        engine: Engine,
        clock: Clock,
        *,
        interval_s: float = 0.5,
        stop_grace_s: float = 10.0,
        pids_limit: int = 4096,
        scheduler_config: SchedulerConfig | None = None,
        instruments: Instruments | None = None,
        gpu_utilization: UtilizationReader | None = None,
        webhooks: WebhookDispatcher | None = None,
        mailer: MailDispatcher | None = None,
        port_range: tuple[int, int] = DEFAULT_PORT_RANGE,
        backoff: Backoff | None = None,
    ) -> None:
        self.store = store
        self.engine = engine
        self.logs = TaskLogs(engine)
        self.clock = clock
        self.interval_s = interval_s
        self.stop_grace_s = stop_grace_s
        self.pids_limit = pids_limit
        self.port_range = port_range  # task ports are reserved from it on each node
        self.backoff = backoff or Backoff()  # how platform failures are retried
        self._specs: dict[str, JobSpec] = {}
        self.scheduler = Scheduler(scheduler_config)
        self.runtimes = LearnedRuntimes(store)  # run times learned from succeeded jobs
        self.jobs = JobMirror(store.jobs)  # the live jobs, read as they change (mirror.py)
        self._views = ViewBuilder(store, self.jobs, self._spec, self.runtimes)
        self._leftovers = LeftoverSweep(store, engine, clock)  # ended tasks nodes still hold
        self.gate = Gate(store, self._write_pending)  # dependencies, arrays' %N
        self.quiet = QuietCycles()  # scheduling cycles skipped when nothing changed (quiet.py)
        self._wake = threading.Event()
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None
        self._nodes_recorded_at = float("-inf")
        self.rolled_up_at: float | None = None  # the last usage roll-up (controller clock)
        self._job_ended_since_roll_up = False
        self.cycles = 0
        self.instruments = instruments if instruments is not None else Instruments()
        self.webhooks = (
            webhooks if webhooks is not None else WebhookDispatcher(self.instruments)
        )  # (an empty dispatcher is falsy: it has a length)
        self.mailer = (
            mailer if mailer is not None else MailDispatcher(store.notify, self.instruments)
        )  # owners' e-mails on job ends (mailer.py), the same kind of worker
        self.gpu_utilization = gpu_utilization  # None: no readings (fake or no NVML)
        self._idle = IdleWatch(gpu_utilization) if gpu_utilization else None
        # leadership's hooks (leader.py, docs/ha.md): cycles run, and nodes are told to start
        # tasks, only while may_act(); a wake-up also goes to wake_leader (a follower's: to
        # the leader, wherever it runs)
        self.may_act: Callable[[], bool] = _always
        self.wake_leader: Callable[[], None] | None = None
        # queued jobs' images warmed on their likely nodes, on a thread of its own (prepull.py)
        self.prepull = PrePuller(engine) if isinstance(engine, NodeImageOps) else None
        self._prepull_planned_at = float("-inf")
        self._start_notes: dict[int, str] = {}  # task id → what its start found of its image
        self.deciding_s = 0.0  # what the last scheduling cycle took to decide (loop's rest)
        self._watching = False  # the engine's hints reach _task_changed (start())
        self._task_news = False  # a hint came since the last poll of every task
        self._polled_at = float("-inf")  # the last poll of every task (controller clock)

    # ---- the background loop ---------------------------------------------------------

    def start(self) -> None:
        self._halt.clear()
        self.watch_engine()
        self.webhooks.start()
        self.mailer.start()
        if self.prepull is not None:
            self.prepull.start()
        self._thread = threading.Thread(target=self._run, name="gpuyard-controller", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._halt.set()
        self._wake.set()
        if self._thread:
            self._thread.join(timeout=10)
        self.webhooks.stop()
        self.mailer.stop()
        if self.prepull is not None:
            self.prepull.stop()

    def idle_jobs(self) -> dict[str, str]:
        """Job id → tenant of the running jobs whose GPUs are idle past their window."""
        return self._idle.idle_jobs() if self._idle else {}

    def watch_engine(self) -> None:
        """Take the engine's hints (a task started or ended): running tasks are then polled
        on a hint and every `FULL_POLL_S`, not every cycle (`_observe`)."""
        self.engine.watch(self._task_changed)
        self._watching = True

    def _task_changed(self) -> None:
        """The engine's hint: a task started or ended somewhere."""
        self._task_news = True
        self.wake()

    def wake(self) -> None:
        self._wake.set()
        if self.wake_leader is not None:
            self.wake_leader()

    def _run(self) -> None:
        while not self._halt.is_set():
            self.deciding_s = 0.0
            try:
                if self.may_act():
                    self.run_cycle()
            except Exception:  # a bad cycle must not stop the loop; the next one retries
                log.exception("controller cycle failed")
            # as long a rest as the cycle spent deciding (woken or not): on a deep queue a
            # burst of submissions is decided in fewer cycles and the API keeps half the CPU;
            # a burst of starts on a short queue rests next to nothing
            self._halt.wait(self.deciding_s)
            self._wake.wait(self.interval_s)
            self._wake.clear()

    def run_cycle(self) -> None:
        began = time.perf_counter()
        every = self.engine.nodes()
        self._record_nodes(every)
        nodes = self._cordoned(every)
        self._observe()
        self._leftovers.run(every)  # after the ends this cycle recorded
        bound_tasks = self._settle()
        self._enforce(nodes, bound_tasks)
        self._schedule(nodes)
        self._plan_prepulls(nodes)
        self._roll_up()
        self.cycles += 1
        self.instruments.controller_cycle.observe(time.perf_counter() - began)

    def _cordoned(self, nodes: list[Node]) -> list[Node]:
        """Nodes as the scheduler sees them (cordons applied); preempt overdue drains' jobs."""
        cordons = self.store.nodes.cordons()
        overdue = overdue_drains(cordons, self.clock.now())
        if overdue:
            tasks = self.store.jobs.active_tasks()
            bound = self.jobs.in_states(JobState.SCHEDULED, JobState.RUNNING)
            tenants = {t.name: t for t in self.store.tenants.tenants()}
            jobs = {j.id: j for j in bound}
            for p in drain_preemptions(overdue, tasks, jobs, tenants, self.stop_grace_s):
                log.info("preempting %s: %s", p.job_id, p.message)
                self.store.jobs.note(p.job_id, NODE_DRAINED, p.message)
                self.preempt(p.job_id, p.grace_s)
        return with_cordons(nodes, cordons)

    # ---- 1. observe ------------------------------------------------------------------

    def _observe(self) -> None:
        """Every active task's status when the engine hinted that one started or ended (or
        nothing watches: the controller not started), and every `FULL_POLL_S` regardless
        (a hint may be lost, a supervisor killed); in between, the starting tasks only
        (what they wait for, "pulling image X", comes with no hint)."""
        tasks = self.store.jobs.active_tasks()
        now = self.clock.now()
        if not self._watching or self._task_news or now - self._polled_at >= FULL_POLL_S:
            self._task_news = False  # (a hint from now on is news for the next cycle)
            self._polled_at = now
        else:
            tasks = [t for t in tasks if t.state == TaskState.STARTING]
        statuses = [(t, self._status(t)) for t in tasks]
        for task, status in statuses:
            if status is not None:
                self._apply_status(task, status)
                self._show_detail(task, status)

    def _show_detail(self, task: TaskRecord, status: TaskStatus) -> None:
        """What a starting task waits for ("pulling image X", from its node): kept on the task
        and, each time it changes (not each cycle), told as an event of its job."""
        if status.phase == TaskPhase.STARTING and status.detail and status.detail != task.message:
            told = self.store.jobs.task_detail(task.id, TaskReason.PULLING_IMAGE, status.detail)
            if told and (retry := retry_of(status.detail)) is not None:
                self.instruments.image_pull_retries.labels(retry[1]).inc()

    def _status(self, task: TaskRecord) -> TaskStatus | None:
        """The task's status; UNKNOWN if its node is gone; None (no news) if its agent is slow."""
        try:
            return self.engine.status(task.node, task.key)
        except AgentUnreachable as e:
            log.warning("no status of %s this cycle: %s", task.key, e)
            return None
        except NodeUnavailable:
            return TaskStatus(task.key, TaskPhase.UNKNOWN)

    def _apply_status(self, task: TaskRecord, status: TaskStatus) -> None:
        jobs = self.store.jobs
        if (
            status.phase in (TaskPhase.RUNNING, TaskPhase.EXITED)
            and task.state == TaskState.STARTING
        ):
            note = start_event_note(self._start_notes.pop(task.id, None))
            jobs.task_running(task.id, status.started_at or self.clock.now(), note)
        if status.phase == TaskPhase.EXITED and status.exit is not None:
            self._start_notes.pop(task.id, None)
            job = jobs.get(task.job_id)
            stop_reason = _stop_reason(job, task)
            state, reason = task_end_state(status.exit, stop_reason)
            message = status.exit.message or None
            if jobs.task_ended(
                task.id, state, status.exit.exit_code, reason, message, status.exit.finished_at
            ):
                self._release(task)
        elif status.phase == TaskPhase.UNKNOWN:
            message = f"node {task.node} has no trace of the task (node lost or restarted)"
            jobs.task_ended(
                task.id, TaskState.FAILED, None, TaskReason.NODE_LOST, message, self.clock.now()
            )

    def _release(self, task: TaskRecord) -> None:
        try:
            self.engine.release(task.node, task.key)
        except (NodeUnavailable, OSError) as e:
            log.warning("could not release task %s on %s: %s", task.key, task.node, e)

    # ---- 2. settle -------------------------------------------------------------------

    def _settle(self) -> dict[str, list[TaskRecord]]:
        """Settle each bound job; the tasks of their attempts as read (for `_enforce`)."""
        bound_jobs = self.jobs.in_states(JobState.SCHEDULED, JobState.RUNNING)
        tasks_of = self.store.jobs.attempts_tasks(bound_jobs)
        for bound in bound_jobs:
            tasks = tasks_of[bound.id]
            job = bound
            if bound.state == JobState.SCHEDULED and any(t.started_at for t in tasks):
                first = min(t.started_at for t in tasks if t.started_at)
                job = self.store.jobs.move(
                    bound.id, JobState.RUNNING, "Started", started_at=bound.started_at or first
                )
                if bound.started_at is None:  # the job's first start: how long it queued
                    delay = max(0.0, first - bound.submitted_at)
                    self.instruments.queueing_delay.labels(bound.tenant).observe(delay)
            spec = self._spec(job)
            outcome = decide(job, tasks, completion_policy(spec), unplaced(spec, tasks))
            if outcome.stop_rest:  # the completion policy decided: stop the tasks still running
                self._stop_tasks(tasks)
            self._apply_outcome(job, outcome, tasks)
        return tasks_of

    def _apply_outcome(
        self, job: JobRecord, outcome: Outcome, tasks: Sequence[TaskRecord] = ()
    ) -> None:
        jobs = self.store.jobs
        if outcome.verdict is Verdict.WAIT:
            return
        now = self.clock.now()
        outcome, failures, delay = platform_retry(job, outcome, _ran_s(tasks, now), self.backoff)
        if outcome.verdict in (Verdict.RETRY, Verdict.RETRY_UNCOUNTED):
            used = job.retries_used + (outcome.verdict is Verdict.RETRY)
            note = (
                f"retry {used}/{job.retry_count}"
                if outcome.verdict is Verdict.RETRY
                else "retried without counting against retryCount"
            )
            if delay:
                note += f", in {delay:g} s (platform failure {failures}/{self.backoff.cap})"
            jobs.move(
                job.id,
                JobState.QUEUED,
                outcome.reason,
                f"{note}; {outcome.message}" if outcome.message else note,
                attempt=job.attempt + 1,
                retries_used=used,
                stop_requested=None,
                platform_failures=failures,
                not_before=now + delay if delay else None,
            )
            return
        self._ended(jobs.move(job.id, outcome.job_state, outcome.reason, outcome.message))

    # ---- 3. enforce ------------------------------------------------------------------

    def _enforce(self, nodes: list[Node], bound_tasks: dict[str, list[TaskRecord]]) -> None:
        now = self.clock.now()
        self._watch_idle(nodes, now, bound_tasks)
        self._stop_idle_sessions(now)
        for job in self.jobs.in_states(JobState.RUNNING):
            limit = self._spec(job).max_runtime_s
            if not limit or job.stop_requested:
                continue
            starts = [t.started_at for t in self.store.jobs.tasks(job.id, job.attempt)]
            attempt_start = min((s for s in starts if s), default=None)
            if attempt_start is not None and now - attempt_start > limit:
                self.store.jobs.request_stop(job.id, TaskReason.TIMEOUT)
        for job in self.jobs.stop_requested():
            if job.state == JobState.QUEUED:
                self._ended(
                    self.store.jobs.move(
                        job.id, JobState.STOPPED, job.stop_requested, "stopped before it started"
                    )
                )
            else:
                self._stop_tasks(self.store.jobs.tasks(job.id, attempt=job.attempt))

    def _watch_idle(
        self, nodes: list[Node], now: float, bound_tasks: dict[str, list[TaskRecord]]
    ) -> None:
        """Flag or stop the running jobs whose GPUs all stayed idle for their window (their
        tasks as `_settle` read them this cycle: a window is minutes long)."""
        if self._idle is None:
            return
        jobs = [j for j in self.jobs.in_states(JobState.RUNNING) if not j.stop_requested]
        running = [(j, bound_tasks.get(j.id, [])) for j in jobs]
        tenants = {t.name: t for t in self.store.tenants.tenants()}
        gpus: dict[tuple[str, int], GpuDevice] = {
            (n.name, g.index): g for n in nodes for g in n.gpus
        }
        for finding in self._idle.check(running, tenants, gpus, now):
            self._act_on_idle(finding)

    def _stop_idle_sessions(self, now: float) -> None:
        """Stop the interactive jobs nobody attached to for their tenant's timeout."""
        running = [
            (j, self.store.jobs.tasks(j.id, attempt=j.attempt))
            for j in self.store.jobs.in_states(JobState.RUNNING)
            if not j.stop_requested and self._spec(j).interactive
        ]
        if not running:
            return
        tenants = {t.name: t for t in self.store.tenants.tenants()}
        for idle in idle_sessions(running, tenants, now):
            log.info("job %s: %s", idle.job_id, idle.message)
            self.store.jobs.note(idle.job_id, TaskReason.SESSION_IDLE, idle.message)
            with contextlib.suppress(JobNotFound, JobAlreadyEnded):
                self.store.jobs.request_stop(idle.job_id, TaskReason.SESSION_IDLE)

    def _act_on_idle(self, finding: IdleFinding) -> None:
        log.info("job %s: idle GPUs (%s): %s", finding.job_id, finding.action, finding.message)
        self.instruments.idle_gpu.labels(finding.tenant, str(finding.action)).inc()
        self.store.jobs.note(finding.job_id, TaskReason.IDLE_GPU, finding.message)
        if finding.action is IdleGpuAction.STOP:
            try:
                self.store.jobs.request_stop(finding.job_id, TaskReason.IDLE_GPU)
            except (JobNotFound, JobAlreadyEnded):
                return

    def preempt(self, job_id: str, grace_s: float) -> None:
        """Stop a running job to make room: SIGTERM, `grace_s` to checkpoint, then SIGKILL.

        The job goes back to the queue as a new attempt that does not count as a retry.
        """
        try:
            job = self.store.jobs.request_stop(job_id, TaskReason.PREEMPTED)
        except (JobNotFound, JobAlreadyEnded):
            return
        self._stop_tasks(self.store.jobs.tasks(job.id, attempt=job.attempt), grace_s)

    def _stop_tasks(self, tasks: Sequence[TaskRecord], grace_s: float | None = None) -> None:
        to_stop = [t for t in tasks if not t.state.is_final and not t.stop_sent]
        grace = self.stop_grace_s if grace_s is None else grace_s
        for t in to_stop:
            try:
                self.engine.stop(t.node, t.key, grace)
            except NodeUnavailable as e:
                log.warning("could not stop %s: %s", t.key, e)
        if to_stop:
            self.store.jobs.stop_sent(t.id for t in to_stop)

    # ---- 4. schedule -----------------------------------------------------------------

    def _schedule(self, nodes: list[Node]) -> None:
        now = self.clock.now()
        self.jobs.refresh()
        tenants, tasks = self.store.tenants.tenants(), self.store.jobs.active_tasks()
        read = inputs(self.jobs.rev, nodes, tenants, tasks)
        if self.quiet.skip(read, now):  # nothing it reads changed: it would decide nothing
            return
        waiting = [j for j in self.jobs.in_states(JobState.QUEUED) if not j.stop_requested]
        if held := [j for j in waiting if j.held_by]:  # `gpuyard hold`: keeps its place only
            self._write_pending({j.id: held_pending(j) for j in held})
            waiting = [j for j in waiting if not j.held_by]
        waiting = self.gate.admit(waiting, self._ended)  # `after` and `%N`: not seen if kept
        backing_off = [j for j in waiting if j.not_before is not None and j.not_before > now]
        queued = [j for j in waiting if j.not_before is None or j.not_before <= now]
        if backing_off:  # a platform failure's backoff: not placed, holds nothing
            self._write_pending({j.id: _backoff_pending(j) for j in backing_off})
        partly = self._views.partly_placed()  # gang: false, their tasks placed as they fit
        if not queued and not partly:
            self.quiet.ran(read, now, False, math.inf, backing_off)
            return
        began = time.perf_counter()
        view = self._views.build(nodes, tenants, tasks, queued, self.clock.now(), partly)
        # the scheduler assumed its placements on its snapshot; bind commits, start tells the node
        result = self.scheduler.cycle(view)
        decided = bool(result.admit or result.preempt)
        self.quiet.ran(read, now, decided, self.scheduler.quiet_until(view), backing_off)
        waiting_ids = {j.id for j in queued}  # (a running job's remainder has no pending row)
        for p in result.preempt:
            log.info("preempting %s for %s: %s", p.job_id, p.for_job_id, p.reason)
            self.preempt(p.job_id, p.grace_s)
        self._write_pending(  # (the cycle's decisions end with their reasons written)
            {
                jid: Pending(
                    str(r.code),
                    r.message,
                    r.position,
                    r.queue_length,
                    r.estimated_start,
                    _eta_basis(r),
                )
                for jid, r in result.pending_reasons.items()
                if jid in waiting_ids
            }
        )
        self.deciding_s = time.perf_counter() - began
        by_id = {j.id: j for j in queued}
        more = {j.id: j for j in partly}  # their remainders: admitted, they add tasks
        node_by_name = {n.name: n for n in nodes}
        launches = []
        for placement, admission in zip(result.admit, result.admissions, strict=True):
            job = by_id.get(placement.job_id) or more[placement.job_id]
            bind = self.store.jobs.bind if job.id in by_id else self.store.jobs.bind_more
            bound = bind(job.id, job.attempt, _new_tasks(placement), admission.borrowed)
            tenant = view.tenants.get(job.tenant) if view.tenants else None
            peers = self._peers(job, bound, node_by_name, tenant)
            if peers is None:
                continue
            logins = launch_logins(self.store, job)
            storage = launch_storage(self.store, job, self._spec(job))
            for task in bound:
                node = node_by_name[task.node]
                launch = build_launch(
                    job, self._spec(job), task, node, self.pids_limit, tenant, peers, logins,
                    storage,
                )
                launch = with_ssh(launch, self._spec(job), self.store.secrets)
                launches.append((task, launch))
        if self.may_act():  # else the new leader finds them bound, never started: NodeLost
            self._start_all(launches)
        self.instruments.scheduling_cycle.observe(time.perf_counter() - began)

    def _write_pending(self, reasons: Mapping[str, Pending]) -> None:
        """Store the pending reasons that changed since they were last written or read."""
        if changed := self.jobs.pending_to_write(reasons):
            self.store.jobs.set_pending(changed)
            self.jobs.wrote_pending(changed)

    def _peers(
        self, job: JobRecord, bound: list[TaskRecord], nodes: dict[str, Node], tenant: Tenant | None
    ) -> tuple[TaskPeer, ...] | None:
        """Reserve the ports of a bound job's tasks and have their nodes hold their addresses;
        None (its tasks failed) if a node cannot, or the job may no longer use the host's
        network (a spec refusal: not retried)."""
        spec = self._spec(job)
        if refused := host_network_refused(spec, tenant):
            return self._fail_bound(bound, TaskReason.INVALID_SPEC, f"hostNetwork: {refused}")
        if refused := storage_refused(spec, launch_storage(self.store, job, spec)):
            return self._fail_bound(bound, TaskReason.INVALID_SPEC, refused)
        try:
            ports = reserve_ports(self.store, spec, bound, self.port_range)
        except PortsExhausted as e:
            return self._fail_bound(bound, TaskReason.AGENT_ERROR, str(e))
        try:
            addresses = {} if spec.host_network else claim_addresses(self.engine, bound)
        except Exception as e:  # the node's to fix: retried as any platform failure
            message = f"could not get the tasks' network addresses: {e}"
            return self._fail_bound(bound, TaskReason.AGENT_ERROR, message)
        return job_peers(spec, bound, nodes, ports, addresses)

    def _fail_bound(self, bound: list[TaskRecord], reason: str, message: str) -> None:
        """End a bound job's tasks before they started (the attempt fails, as decided)."""
        now = self.clock.now()
        for task in bound:
            self.store.jobs.task_ended(task.id, TaskState.FAILED, None, reason, message, now)

    def _start_all(self, launches: list[tuple[TaskRecord, TaskLaunch]]) -> None:
        """Tell the nodes, several starts at once; record each start that failed, and why."""
        if not launches:
            return
        with ThreadPoolExecutor(min(MAX_PARALLEL_STARTS, len(launches))) as pool:
            failures = list(pool.map(self._try_start, launches))
        for (task, _), failure in zip(launches, failures, strict=True):
            if failure is not None:
                reason, message = failure
                log.warning("could not start %s: %s", task.key, message)
                self.store.jobs.task_ended(
                    task.id, TaskState.FAILED, None, reason, message, self.clock.now()
                )

    def _try_start(self, item: tuple[TaskRecord, TaskLaunch]) -> tuple[str, str] | None:
        task, launch = item
        try:
            note = self.engine.start(task.node, launch)
        except ImageError as e:  # the spec's image: retrying cannot help
            return TaskReason.IMAGE_ERROR, str(e)
        except LaunchInvalid as e:  # the spec as given cannot run here: nor would a retry
            return TaskReason.INVALID_SPEC, str(e)
        except Exception as e:  # any other start failure is the platform's, and retried
            return TaskReason.AGENT_ERROR, f"could not start the task: {e}"
        if note:
            self._start_notes[task.id] = note
        return None

    def _plan_prepulls(self, nodes: list[Node]) -> None:
        """Every `PLAN_INTERVAL_S`, hand the pre-puller the queue heads' images and their
        likely nodes (the pulls happen on its thread and on the nodes, never here)."""
        now = self.clock.now()
        if self.prepull is None or now - self._prepull_planned_at < PLAN_INTERVAL_S:
            return
        self._prepull_planned_at = now
        queued = [j for j in self.jobs.in_states(JobState.QUEUED)
                  if not j.held_by and not j.stop_requested]
        queued.sort(key=lambda j: (j.pending_position or 1 << 30, j.seq))
        specs = [self._spec(j) for j in queued[:MAX_JOBS]]
        if any(s.image or any(r.image for r in s.task_roles.values()) for s in specs):
            self.prepull.offer(warm_targets(specs, nodes, self.store.jobs.active_tasks()))
        else:
            self.prepull.offer([])

    # ---- helpers ---------------------------------------------------------------------

    def _ended(self, job: JobRecord) -> None:
        """A job reached an end state: count it, learn its run time if it succeeded, notify
        its webhook and its owner, forget its spec."""
        self.instruments.jobs_finished.labels(job.tenant, str(job.state)).inc()
        if job.state == JobState.SUCCEEDED and not self._spec(job).interactive:
            self.runtimes.job_succeeded(job)  # a session's length is a person's, not the job's
        url = self._spec(job).webhook
        if url:
            self.webhooks.enqueue(url, job_payload(job))
        self.mailer.job_ended(job)  # its owner's e-mail, if they asked (never waits)
        self._job_ended_since_roll_up = True
        self._specs.pop(job.id, None)

    def _spec(self, job: JobRecord) -> JobSpec:
        spec = self._specs.get(job.id)
        if spec is None:
            spec = self._specs[job.id] = parse_job_spec(job.spec)
        return spec

    def _roll_up(self) -> None:
        """Account the task rows in the usage roll-up, every `ROLLUP_INTERVAL_S`, or every
        `ROLLUP_AFTER_END_S` while jobs end."""
        now = self.clock.now()
        since = None if self.rolled_up_at is None else now - self.rolled_up_at
        wait = ROLLUP_AFTER_END_S if self._job_ended_since_roll_up else ROLLUP_INTERVAL_S
        if since is None or since >= wait:  # the queues as now since the last pass (capped)
            self.store.accounting.roll_up(now, min(since or 0.0, ROLLUP_INTERVAL_S))
            self.rolled_up_at = now
            self._job_ended_since_roll_up = False

    def _record_nodes(self, nodes: list[Node]) -> None:
        now = self.clock.now()
        if now - self._nodes_recorded_at >= NODE_RECORD_INTERVAL_S:
            self.store.nodes.record(nodes, self.engine.name)
            self._nodes_recorded_at = now


def start_event_note(note: str | None) -> str | None:
    """A task's start event message from what its start found: `image present`, or that the
    image came first (`after pulling image X`)."""
    if note is None or note == "image present":
        return note
    return f"after {note}"


def _always() -> bool:
    return True


def _ran_s(tasks: Sequence[TaskRecord], now: float) -> float | None:
    """How long the attempt ran: first start to last end (None if nothing started)."""
    started = [t.started_at for t in tasks if t.started_at]
    if not started:
        return None
    ended = [t.finished_at for t in tasks if t.finished_at]
    return max(ended, default=now) - min(started)


def held_pending(job: JobRecord) -> Pending:
    """A held job's reason: who holds it and how to let it go (it is not scheduled)."""
    message = (
        f"held by {job.held_by}: not scheduled until released (gpuyard release {job.id}); "
        "it keeps its place in the queue"
    )
    return Pending(HELD, message)


def _backoff_pending(job: JobRecord) -> Pending:
    """A queued job's reason carries nothing (only an ended job keeps one): its last
    requeue event says which failure it waits out."""
    at = time.strftime("%H:%M:%S", time.localtime(job.not_before or 0))
    message = (
        f"backing off after {job.platform_failures} platform failure(s) in a row "
        f"(the job's last event says which): placed again from {at}"
    )
    return Pending(BACKOFF, message, eta=job.not_before, eta_basis="the backoff's delay")


# what an estimated start rests on when the scheduler's reason does not say it (its code does)
ETA_BASIS_BY_CODE = {
    PendingCode.WAITING_FOR_PREEMPTION: "the preempted jobs' grace period",
    PendingCode.BUDGET_EXHAUSTED: "the end of the tenant's budget period",
}


def _eta_basis(reason: PendingReason) -> str | None:
    if reason.estimated_start is None:
        return None
    return reason.eta_basis or ETA_BASIS_BY_CODE.get(reason.code)


def _stop_reason(job: JobRecord | None, task: TaskRecord) -> str | None:
    if job is not None and job.stop_requested:
        return job.stop_requested
    return TaskReason.CANCELLED if task.stop_sent else None


def _new_tasks(placement: JobPlacement) -> list[NewTask]:
    return [
        NewTask(
            t.role,
            t.index,
            t.node,
            t.gpu_indices,
            t.resources.cpu_milli,
            t.resources.memory_mb,
            t.gpu_memory_mb,
        )
        for t in placement.tasks
    ]
