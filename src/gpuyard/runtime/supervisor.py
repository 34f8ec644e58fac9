"""The per-task supervisor: `python -m gpuyard.runtime.supervisor <task_dir>`.

One small process per task drives the OCI runtime and writes the task's `exit.json`, so that
a task's end is recorded even while the server is down.

Detaching. Supervisors are normally forked by the node's zygote (`zygote.py`: a resident
process that imported this module once), so a start costs no interpreter start-up. Without
it (`python -m gpuyard.runtime.supervisor <task_dir>`, the fallback) the server starts this
module as a child in a new session and waits for it; it forks once more and exits at once
(double fork) after writing `supervisor.pid`. Either way the supervisor is in a process group
of its own, in a session that is not the server's (the zygote's, or the one the exec'd middle
process made), is never the server's child to reap (the
zygote's children are reaped by the kernel; orphans go to init), and survives `kill -9` of
the server and of the server's process group. `supervisor.pid` (pid + starttime) is written
before `ContainerRuntime.start` returns, and stop signals are handled (or held blocked) from
the moment the pid is known, so a stop never finds it unprotected.

Life. It becomes a child subreaper (prctl PR_SET_CHILD_SUBREAPER), then:
1. `<rt> create` with stdin /dev/null and stdout+stderr on `<task_dir>/log` (O_APPEND), which
   the container's process inherits. `create` exits leaving the container's init behind, and
   the kernel reparents it to this subreaper, so it is our child: we can waitpid it.
2. Starts it: crun's by releasing its exec fifo in this process, as `crun start` would
   (`ociruntime.release_exec_fifo`; the task spec's `startInProcess`, false with runc or a
   `poststart` hook), else `<rt> start`; then writes `started` (the node now reports RUNNING)
   and sends the start hint. (Not `<rt> run --detach`: a container that ends at once can be
   reaped by the runtime before it exits, and its exit status is lost.)
3. Waits (pidfd + select) for the init to exit, or for a stop request: SIGTERM to this process,
   with `stop.json` holding the grace. A stop sends `<rt> kill <id> TERM` (the container's
   pid 1 gets it; a pid 1 only receives signals it handles, as under Docker and Kubernetes),
   then after the grace `<rt> kill --all <id> KILL`, and kill(2) itself if that did not help.
4. waitpid → exit code or signal; reads the cgroup's `oom_kill` counter (before deleting:
   delete removes the cgroup); `<rt> delete --force`; unmounts the task's pinned dirs and its
   overlay root (`hostdirs.release_task_mounts`; an image task's upper dir stays until the
   task dir is removed); writes `exit.json`
   atomically; exits.
If create or start fails, `exit.json` holds AgentError (or CommandNotFound) with crun/runc's
error. If anything else goes wrong, AgentError with the exception, after a forced delete.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import NoReturn

from gpuyard.model import TaskReason
from gpuyard.runtime.cgroups import oom_kill_count
from gpuyard.runtime.exits import (
    decode_wait_status,
    exit_reason,
    launch_failure_reason,
    runtime_errors,
    with_log,
)
from gpuyard.runtime.hostdirs import release_pins, release_task_mounts
from gpuyard.runtime.logcap import DEFAULT_LIMIT_MB, MIB, CappedLog, LogPump
from gpuyard.runtime.ociruntime import OciRuntime, release_exec_fifo
from gpuyard.runtime.procwait import run_exact
from gpuyard.runtime.taskdir import TaskDir, process_starttime, read_json, write_json
from gpuyard.runtime.tasknet import begin_task_rules, end_task_rules, teardown_task
from gpuyard.runtime.types import TaskExit

PR_SET_CHILD_SUBREAPER = 36
DEFAULT_GRACE_S = 10.0  # a SIGTERM without stop.json (e.g. the node shutting down)
RT_TIMEOUT_S = 60.0
KILL_WAIT_S = 10.0
DRAIN_S = 5.0  # after the init's exit, for the rest of its output
POLL_S = 1.0


class LaunchFailed(Exception):
    """crun/runc could not create or start the container."""


class StopFlag:
    """Set by the SIGTERM/SIGINT handler; the wakeup pipe interrupts the wait loop."""

    def __init__(self) -> None:
        self.signalled = False
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def install(self) -> None:
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGTERM, self._handle)
        signal.signal(signal.SIGINT, self._handle)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    def _handle(self, signum: int, frame: object) -> None:
        self.signalled = True

    def drain(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(self.wake_r, 256):
                pass


def say(message: str) -> None:
    """A line in supervisor.log (this process's stderr)."""
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def set_subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")


class Supervisor:
    def __init__(self, td: TaskDir, stop: StopFlag) -> None:
        spec = read_json(td.task)
        if not isinstance(spec, dict):
            raise ValueError(f"{td.task} is missing or not valid JSON")
        self.td = td
        self.stop = stop
        self.rt = OciRuntime.from_json(spec["runtime"])
        self.cid = str(spec["containerId"])
        self.cgroup = str(spec["cgroupPath"])
        self.memory_mb = int(spec.get("memoryMb") or 0)
        self.overlay = bool(spec.get("overlay"))
        self.start_in_process = bool(spec.get("startInProcess"))
        self.log_limit = int(spec.get("logLimitBytes") or DEFAULT_LIMIT_MB * MIB)
        self.pump: LogPump | None = None  # the container's output → the capped log
        self.stop_requested = False
        self.term_at: float | None = None  # monotonic time SIGTERM was sent
        self.kill_at: float | None = None  # monotonic time SIGKILL was sent
        self.notes: list[str] = []

    # --- OCI runtime commands -------------------------------------------------------------

    def _rt(self, *args: str, log_fd: int | None = None) -> subprocess.CompletedProcess[bytes]:
        out = log_fd if log_fd is not None else subprocess.DEVNULL
        return run_exact(
            self.rt.command(*args, log=self.td.runtime_log),
            stdout=out,
            stderr=out,
            timeout=RT_TIMEOUT_S,
        )

    def _launch_step(self, log_fd: int, *args: str) -> None:
        try:
            done = self._rt(*args, log_fd=log_fd)
        except subprocess.TimeoutExpired as e:
            raise LaunchFailed(f"{self.rt.name} {args[0]} timed out after {e.timeout:g}s") from e
        if done.returncode != 0:
            error = runtime_errors(self.td.runtime_log)
            raise LaunchFailed(error or f"{self.rt.name} {args[0]} exited {done.returncode}")

    def create(self, log_fd: int) -> int:
        """Create the container; the pid (host namespace) of its init. Its mount namespace
        then holds its own copies of the task's pinned dirs: the host's go at once. The task's
        network rules (tasknet.py) are added meanwhile, and must be in before it starts."""
        rules = self._begin_rules()
        try:
            self._launch_step(
                log_fd,
                "create",
                "--bundle",
                str(self.td.bundle),
                "--pid-file",
                str(self.td.container_pid),
                self.cid,
            )
        finally:
            try:
                release_pins(self.td.path)
            except OSError as e:
                say(f"cannot unmount the task's pinned dirs: {e}")
            rules_failed = self._end_rules(rules)
        if rules_failed:
            raise LaunchFailed(rules_failed)
        return int(self.td.container_pid.read_text().strip())

    def _begin_rules(self) -> object:
        """The nft process adding the task's rules (None: none to add), or why it failed."""
        try:
            return begin_task_rules(self.td.path)
        except OSError as e:
            return e

    def _end_rules(self, rules: object) -> str | None:
        """None once the task's rules are in, else why they are not."""
        try:
            if isinstance(rules, OSError):
                raise rules
            end_task_rules(rules)
        except OSError as e:
            return f"cannot add the task's network rules: {e}"
        return None

    def start(self, log_fd: int) -> str:
        """Start the created container: in this process when it may, else `<rt> start`;
        says which."""
        fifo = self.rt.exec_fifo(self.cid) if self.start_in_process else None
        try:
            if fifo is not None and release_exec_fifo(fifo):
                return "through its exec fifo"
        except OSError as e:
            raise LaunchFailed(f"cannot start the container through {fifo}: {e}") from e
        self._launch_step(log_fd, "start", self.cid)
        return f"by {self.rt.name} start"

    def delete(self) -> None:
        """Delete the container, then unmount its pinned dirs and overlay root (if any)."""
        try:
            done = self._rt("delete", "--force", self.cid)
        except subprocess.TimeoutExpired:
            say(f"{self.rt.name} delete timed out")
            return
        if done.returncode != 0:
            say(f"{self.rt.name} delete exited {done.returncode}")
        try:
            release_task_mounts(self.td.path)
        except OSError as e:
            say(f"cannot unmount the task's dirs or overlay root: {e}")
        try:  # its network namespace, veth, address and rules (tasknet.py)
            teardown_task(self.td.path)
        except OSError as e:
            say(f"cannot remove the task's network: {e}")

    def kill(self, *args: str) -> bool:
        try:
            return self._rt("kill", *args).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    # --- waiting and stopping -------------------------------------------------------------

    def poll_stop(self) -> float | None:
        """The grace of a pending stop request (signal or stop.json), or None."""
        grace = self.td.stop_grace()
        if grace is None and self.stop.signalled:
            grace = DEFAULT_GRACE_S
        if grace is not None and not self.stop_requested:
            self.stop_requested = True
            say(f"stop requested, grace {grace:g}s")
        return grace

    def wait(self, init_pid: int) -> int:
        """Wait for the container's init, handling stop requests; its wait status."""
        pidfd = os.pidfd_open(init_pid)
        try:
            while True:
                timeout = min(self._escalate(init_pid), self._pump_wait())
                watched = [pidfd, self.stop.wake_r, *self._pump_fds()]
                ready, _, _ = select.select(watched, [], [], timeout)
                self.stop.drain()
                if self.pump is not None and self.pump.read_end in ready:
                    self.pump.pump_ready()
                if pidfd in ready:
                    break
        finally:
            os.close(pidfd)
        return os.waitpid(init_pid, 0)[1]

    def _pump_fds(self) -> list[int]:
        return self.pump.fds() if self.pump is not None else []

    def _pump_wait(self) -> float:
        """While the log pump's rate is used up (logcap.py), the seconds until it reads
        again; else POLL_S (it is selected on then)."""
        wait = self.pump.wait_s() if self.pump is not None else 0.0
        return wait if wait > 0 else POLL_S

    def _end_pump(self, timeout_s: float) -> None:
        """The rest of the output into the log (the container's writers end with it)."""
        if self.pump is not None:
            self.pump.drain(timeout_s)
            self.pump.close()
            self.pump = None

    def _escalate(self, init_pid: int) -> float:
        """Act on a stop request (TERM, then KILL after the grace); seconds to the next check."""
        grace, now = self.poll_stop(), time.monotonic()
        if grace is None:
            return POLL_S
        if self.term_at is None:
            self.term_at = now
            self.kill(self.cid, "TERM")
            self.notes.append(f"stop requested: SIGTERM sent, grace {grace:g}s")
        if self.kill_at is None:
            deadline = self.term_at + grace
            if now < deadline:
                return min(POLL_S, deadline - now)
            self.kill_at = now
            self._force_kill(init_pid, grace)
        elif now >= self.kill_at + KILL_WAIT_S:
            with contextlib.suppress(ProcessLookupError):
                os.kill(init_pid, signal.SIGKILL)
        return POLL_S

    def _force_kill(self, init_pid: int, grace: float) -> None:
        self.notes.append(f"still running {grace:g}s after SIGTERM: SIGKILL sent")
        say("grace over, killing")
        if not self.kill("--all", self.cid, "KILL"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(init_pid, signal.SIGKILL)

    def reap_orphans(self) -> None:
        """Reap runtime helpers that were reparented to this subreaper (no zombies left)."""
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass

    # --- outcome ---------------------------------------------------------------------------

    def finish(self, code: int | None, reason: str, message: str) -> None:
        exit_ = TaskExit(code, reason, time.time(), message, stop_requested=self.stop_requested)
        self.td.write_exit(exit_)
        say(f"exit written: {reason} (code {code})")

    def finish_exited(self, status: int, oom_kills: int) -> None:
        code, sig = decode_wait_status(status)
        reason = exit_reason(code, sig, oom_kills)
        notes = list(self.notes)
        if reason == TaskReason.OOM_KILLED:
            notes.insert(
                0,
                f"out of memory: the task used more than its {self.memory_mb} MB "
                f"limit and the kernel killed it (oom_kill {oom_kills})",
            )
        if reason == TaskReason.COMPLETED:
            self.finish(code, reason, "\n".join(notes))
            return
        self.finish(code, reason, with_log("\n".join(notes), self.td.log))

    def finish_launch_failed(self, error: str) -> None:
        message = f"{self.rt.name} could not start the container: {error}"
        self.finish(None, launch_failure_reason(error), message)

    # --- the whole life ----------------------------------------------------------------------

    def launch(self) -> int | None:
        """Create and start the container; its init pid, or None if it ended another way."""
        self.pump = LogPump(CappedLog(self.td.log, self.log_limit))  # logcap.py
        log_fd = self.pump.write_end
        init_pid = None
        try:
            init_pid = self.create(log_fd)
            if self.poll_stop() is not None:
                self._abort(init_pid)
                self.finish(None, TaskReason.CANCELLED, "stopped before the container started")
                return None
            how = self.start(log_fd)
        except LaunchFailed as e:
            self._abort(init_pid)
            self.finish_launch_failed(str(e))
            return None
        finally:
            if self.pump is not None:  # None: ended by _abort
                self.pump.close_write_end()
        self.td.mark_started(time.time())
        say(f"container {self.cid} started {how}, init pid {init_pid}")
        return init_pid

    def _abort(self, init_pid: int | None) -> None:
        self.delete()
        self._end_pump(0)
        if init_pid is not None:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(init_pid, 0)
        self.reap_orphans()

    def run(self) -> None:
        set_subreaper()
        init_pid = self.launch()
        if init_pid is None:
            return
        status = self.wait(init_pid)
        oom_kills = oom_kill_count(self.cgroup)
        self.delete()
        self._end_pump(DRAIN_S)
        self.reap_orphans()
        self.finish_exited(status, oom_kills)


def record_supervisor(td: TaskDir, pid: int) -> None:
    write_json(td.pid_file, {"pid": pid, "starttime": process_starttime(pid)})


def redirect_stdio(log: Path) -> None:
    null = os.open(os.devnull, os.O_RDONLY)
    out = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(null)
    os.close(out)


def supervise(td: TaskDir, stop: StopFlag) -> int:
    """The grandchild's life; any unexpected error still ends in an exit.json."""
    try:
        Supervisor(td, stop).run()
    except Exception as e:
        say(traceback.format_exc())
        with contextlib.suppress(Exception):
            spec = read_json(td.task) or {}
            rt = OciRuntime.from_json(spec["runtime"])
            subprocess.run(
                rt.command("delete", "--force", str(spec["containerId"])),
                capture_output=True,
                timeout=RT_TIMEOUT_S,
                check=False,
            )
        message = with_log(f"task supervisor failed: {type(e).__name__}: {e}", td.log)
        td.write_exit(TaskExit(None, TaskReason.AGENT_ERROR, time.time(), message))
        return 1
    return 0


def run_detached(td: TaskDir, stop: StopFlag) -> NoReturn:
    """The supervisor's whole life, in a freshly forked process: own process group, output on
    supervisor.log, then `supervise`; it never returns into the forking caller's code.

    A process group, not a session: its parent (the zygote, or the exec'd middle process) is
    already in a session of its own, never the server's. A new session per task would also be
    a new scheduler autogroup per task, which doubled `crun`'s latency under load here.
    """
    os.setpgid(0, 0)
    os.chdir("/")
    redirect_stdio(td.supervisor_log)
    code = supervise(td, stop)
    sys.stderr.flush()
    os._exit(code)


def detach(td: TaskDir) -> NoReturn:
    """Fork the supervisor of `td` and end this (middle) process once its pid is recorded.

    The path of `python -m gpuyard.runtime.supervisor <task_dir>` (the node's zygote forks
    supervisors itself, `zygote.py`). Exits 0 when `supervisor.pid` is written.
    """
    stop = StopFlag()
    stop.install()
    pid = os.fork()
    if pid > 0:  # the middle process: record the supervisor, then go
        try:
            record_supervisor(td, pid)
        except OSError as e:
            print(f"cannot write {td.pid_file}: {e}", file=sys.stderr, flush=True)
            os.kill(pid, signal.SIGKILL)
            os._exit(1)
        os._exit(0)
    run_detached(td, stop)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m gpuyard.runtime.supervisor <task_dir>", file=sys.stderr)
        return 2
    detach(TaskDir(Path(args[0]).resolve()))


if __name__ == "__main__":
    sys.exit(main())
