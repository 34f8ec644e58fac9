"""`ContainerRuntime`: the node-side API that runs tasks in OCI containers (crun or runc).

`start` writes the task's state dir (`taskdir.py` has the layout) and its OCI bundle, has the
node's zygote (`zygote.py`, started with the runtime) hand the task to a supervisor forked
ahead of time (`supervisor.py`), and returns once the supervisor's pid is recorded (a few
milliseconds; without a zygote a fresh Python is exec'd: about a tenth of a second); the
container is run by the supervisor, in the background. Everything after that is read from the
task dir, so a new server process (after a restart) sees the same tasks through `keys` and
`status`.

A launch with an `image` runs on a copy-on-write overlay over that image, unpacked once by the
node's `ImageStore` (`images.py`, `overlay.py`); any trouble with the image is an `ImageError`
raised by `start`. Overlays of tasks that are no longer live are unmounted when a node starts.

A launch with real GPUs gets their device nodes, device cgroup rules and driver libraries
(CDI, else the NVIDIA hook) through `gpusetup.apply_gpu_setup`, as `gpu_setup` directs.

Every task but a `hostNetwork` one runs in a network namespace of its own, which the node holds
for it from `claim_addresses` (before its job's tasks start) until its exit is recorded or it is
removed (`tasknet.py`: the node's bridge, addresses, nftables rules and spare namespaces).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuyard.model import TaskReason
from gpuyard.runtime.diskquota import quota_mb
from gpuyard.runtime.errors import LaunchInvalid, RuntimeStartError, TaskStillRunning
from gpuyard.runtime.exits import tail_lines, with_log
from gpuyard.runtime.gpusetup import GpuSetup, apply_gpu_setup
from gpuyard.runtime.hostdirs import (
    mount_host_dirs,
    release_task_mounts,
    remove_unmounted,
    sweep_stale_mounts,
)
from gpuyard.runtime.images import ImageStore
from gpuyard.runtime.logcap import MIB, dropped_bytes, dropped_file
from gpuyard.runtime.mps import MpsDaemons, mps_mounts
from gpuyard.runtime.notify import NotifyListener
from gpuyard.runtime.oci import CGROUP_PARENT, build_config, cgroup_path, write_hosts_files
from gpuyard.runtime.ociruntime import OciRuntime, pick_runtime, starts_in_process
from gpuyard.runtime.overlay import overlay_root, userns_problem
from gpuyard.runtime.pidfence import try_fence_node_pids
from gpuyard.runtime.privatedir import private_dir
from gpuyard.runtime.procwait import wait_pid_ready
from gpuyard.runtime.pullwait import WaitingTasks
from gpuyard.runtime.rootfs import HostRootfs, Rootfs, host_paths_from_env
from gpuyard.runtime.seccompbpf import precompile_seccomp
from gpuyard.runtime.sshd import prepare_ssh
from gpuyard.runtime.sshkit import SshKit
from gpuyard.runtime.taskdir import (
    TaskDir,
    check_key,
    process_starttime,
    read_json,
    write_json,
)
from gpuyard.runtime.tasknet import NetConfig, TaskNetworks
from gpuyard.runtime.types import TaskExit, TaskLaunch, TaskPhase, TaskStatus
from gpuyard.runtime.userns import USERNS_ENV, task_ids
from gpuyard.runtime.zygote import Zygote, ZygoteError, ZygoteLost

log = logging.getLogger("gpuyard.runtime")

SPAWN_TIMEOUT_S = 30.0
ORPHAN_AFTER_S = 60.0  # a task dir without a supervisor pid this old: the spawn was lost
MAX_LOG_READ = 8 << 20
TAIL_READ = 1 << 20
FETCH_VERBS = {"pull": "pulling", "unpack": "unpacking", "verify": "checking registry access to"}


class ContainerRuntime:
    """Runs tasks of this node in containers; one instance per node and state root."""

    def __init__(
        self,
        state_root: Path,
        runtime: str | None = None,
        gpu_setup: GpuSetup | None = None,
        mps: MpsDaemons | None = None,
        fork_supervisors: bool = True,  # False: exec a Python per supervisor (the slow way)
        host_paths: tuple[str, ...] | None = None,  # more host paths tasks see (None: env)
        cgroup_parent: str = CGROUP_PARENT,  # tasks' cgroups go under it (tests: another)
        node_pids_limit: int | None = None,  # on the parent; None: capacity - reserve
        network: NetConfig | None = None,  # the task subnet (None: $GPUYARD_TASK_SUBNET or default)
        userns: bool | None = None,  # user namespaces (None: where the node can, userns.py)
    ) -> None:
        self.state_root = Path(state_root).resolve()
        if (was := private_dir(self.state_root)) is not None:  # env secrets, logs: root only
            log.warning("state root %s was mode %o; made 0700", self.state_root, was)
        self.mps = mps or MpsDaemons(self.state_root / "mps")  # shared GPUs' daemons
        self.gpu_setup = gpu_setup or GpuSetup.from_env()
        self.tasks_dir = self.state_root / "tasks"
        self.tasks_dir.mkdir(parents=True, exist_ok=True)
        self.logs_dir = self.state_root / "logs"  # logs of removed tasks
        self.logs_dir.mkdir(exist_ok=True)
        self._host_rootfs = HostRootfs(
            self.state_root / "hostroot",
            hidden=(self.state_root,),
            extra=host_paths_from_env() if host_paths is None else host_paths,
        )
        self._lock = threading.Lock()
        self.rt: OciRuntime = pick_runtime(
            runtime, self._host_rootfs.prepare(), self.state_root / "probe"
        )
        self.name: str = self.rt.name
        self.cgroup_parent = cgroup_parent
        self.pid_fence = try_fence_node_pids(cgroup_parent, node_pids_limit)  # pidfence.py
        self._listener: NotifyListener | None = None
        # each task's network namespace, address and rules (tasknet.py)
        self.network = TaskNetworks(self.state_root, self.tasks_dir, network or NetConfig.of())
        self.images = ImageStore(self.state_root)
        self.userns = self._userns(userns)
        self.sshkit = SshKit(self.state_root)  # sshd for ssh tasks (sshkit.py)
        self.waiting = WaitingTasks(  # tasks waiting for their image: pullwait.py
            self.tasks_dir, self.images, lambda td, launch: self._launch(td, launch, undo=False)
        )
        self._zygote_lock = threading.Lock()
        self._fork_supervisors = fork_supervisors
        self._zygote: Zygote | None = self._start_zygote() if fork_supervisors else None
        self.mps.sweep(self.keys())
        swept = sweep_stale_mounts(self.tasks_dir, self._live_keys())
        if swept:
            log.info("unmounted %d mounts (overlay roots, pinned dirs) of tasks no longer live",
                     len(swept))
        self.network.sweep()  # namespaces of tasks that ended or never came, and crash leftovers
        resumed = self.waiting.resume()  # tasks that waited for their image when a server died
        if resumed:
            log.info("%d tasks wait for their image again", resumed)

    def _userns(self, wanted: bool | None) -> bool:
        """Whether tasks run in user namespaces here: asked for (or not refused by
        `$GPUYARD_USERNS=0`) and possible over this node's images."""
        if wanted is False or (wanted is None and os.environ.get(USERNS_ENV) == "0"):
            return False
        problem = userns_problem(self.images.root)
        if problem is not None:
            log.warning("tasks run without user namespaces (as their tenant's uid, not root): "
                        "%s", problem)  # fmt: skip
        return problem is None

    def _start_zygote(self) -> Zygote | None:
        """The supervisor forker, started now so that it is warm by the first task."""
        try:
            return Zygote(self.state_root / "zygote.log")
        except ZygoteError as e:
            log.warning("%s; supervisors will be started the slow way", e)
            return None

    # --- starting ---------------------------------------------------------------------------

    def task_dir(self, key: str) -> TaskDir:
        return TaskDir(self.tasks_dir / check_key(key))

    def _rootfs(self, launch: TaskLaunch, td: TaskDir | None) -> tuple[Rootfs, str | None]:
        """The task's root and its image's digest: the host's, or an overlay over its image."""
        if not launch.image:
            with self._lock:
                return self._host_rootfs.prepare(), None
        if td is None:
            raise RuntimeStartError("an image root needs the task's state dir")
        image = self.images.resolve(launch.image, login=launch.image_login)  # checked: private
        id_base = launch.userns_base if self.userns else None
        root = overlay_root(image.lower, td.path, image.config, quota_mb(launch), id_base)
        return root, image.digest

    def _live_keys(self) -> set[str]:
        """Tasks whose exit is not recorded and whose supervisor lives (or is being spawned)."""
        live = set()
        for key in self.keys():
            td = self.task_dir(key)
            alive = self._supervisor_alive(td)
            spawning = alive is None and not self._spawn_lost(td)
            if not td.exit_file.exists() and (alive or spawning):
                live.add(key)
        return live

    def _check(self, launch: TaskLaunch) -> None:
        if launch.memory_mb <= 0 or launch.pids_limit <= 0:
            raise LaunchInvalid(
                f"task {launch.key} needs memory_mb > 0 and pids_limit > 0 "
                f"(got {launch.memory_mb}, {launch.pids_limit})"
            )

    def _write_task(self, td: TaskDir, launch: TaskLaunch) -> None:
        td.bundle.mkdir()
        td.work.mkdir()
        rootfs, digest = self._rootfs(launch, td)
        ids = task_ids(launch, rootfs.image, self.userns)  # root in its namespace, or not
        # dataDir/outputDir: walked beneath the tenant's roots as the tenant's uid, pinned
        pinned = mount_host_dirs(launch, td.path, self.state_root, ids.base is not None)
        os.chown(td.work, ids.host_uid, ids.host_gid)
        if launch.peers:  # a job's task: its hosts files, mounted by build_config
            write_hosts_files(td.path, launch)
        hosts = td.path if launch.peers else None
        config = build_config(launch, rootfs, td.work, hosts, pinned, self.cgroup_parent, ids)
        if launch.ssh is not None:  # sshd before the command (sshd.py)
            prepare_ssh(config, td.path, launch, rootfs, self.sshkit.path(), ids)
        self.network.attach(config, launch, td.path)  # its own namespace, address and rules
        driver = apply_gpu_setup(config, launch.gpus, self.gpu_setup, host_root=not launch.image)
        precompile_seccomp(self.rt.name, config)  # crun loads it as is (seccompbpf.py)
        if launch.gpu_memory_mb:  # a shared GPU: its MPS daemon, pipe and log dirs
            config["mounts"] += mps_mounts(self.mps.acquire(launch))
        write_json(td.launch, dataclasses.asdict(launch))
        write_json(
            td.task,
            {
                "runtime": self.rt.to_json(),
                "containerId": launch.key,
                "cgroupPath": cgroup_path(launch.key, self.cgroup_parent),
                "memoryMb": launch.memory_mb,
                "imageDigest": digest,
                "overlay": digest is not None,
                "gpuDriver": driver,
                "startInProcess": starts_in_process(self.rt, config),
                "logLimitBytes": launch.log_limit_mb * MIB,
            },
        )
        write_json(td.config, config)
        td.log.touch()

    def container_config(self, launch: TaskLaunch, work_dir: Path) -> dict[str, Any]:
        """The OCI config.json of a host-root `launch` (used by the benchmark)."""
        config = build_config(launch, self._rootfs(launch, None)[0], work_dir)
        apply_gpu_setup(config, launch.gpus, self.gpu_setup, host_root=True)
        return config

    def start(self, launch: TaskLaunch) -> str | None:
        """Write the task dir and bundle, spawn the supervisor; does not wait for the task.

        An image that is not ready (not pulled, or not unpacked, or private here and the
        task's login not checked at its registry lately: imageaccess.py) is fetched in the
        background: the task waits for it STARTING (`pullwait.py`) and `start` returns at once.
        Returns what the start found of the task's image: `image present` (launched now),
        `pulling image X` / `unpacking image X` / `checking registry access to image X` (it
        waits); None for a task on the host's root.
        """
        try:
            td = self.task_dir(launch.key)
        except ValueError as e:
            raise RuntimeStartError(str(e)) from e
        self._check(launch)
        fetch = self.images.task_needs(launch.image, launch.image_login) if launch.image else None
        try:
            td.path.mkdir()  # claims the key, also against a concurrent start
        except FileExistsError:
            raise RuntimeStartError(f"task {launch.key} already exists on this node") from None
        if fetch is None:
            self._launch(td, launch)
            return "image present" if launch.image else None
        verb = FETCH_VERBS[fetch]
        try:
            self.waiting.defer(td, launch, verb)
        except OSError as e:
            _discard(td)
            raise RuntimeStartError(f"cannot prepare task {launch.key}: {e}") from e
        return f"{verb} image {launch.image}"

    def _launch(self, td: TaskDir, launch: TaskLaunch, undo: bool = True) -> None:
        """Prepare the claimed task dir and spawn its supervisor (`start`, or once its image is
        here: `undo` False keeps a dir that failed to prepare, for its `exit.json`)."""
        try:
            self._write_task(td, launch)
        except (RuntimeStartError, ValueError, OSError) as e:
            self._release_network(launch.key)
            if undo:
                _discard(td)
            if isinstance(e, RuntimeStartError):
                raise
            if isinstance(e, ValueError):  # the launch's own content (env, capabilities)
                raise LaunchInvalid(f"cannot prepare task {launch.key}: {e}") from e
            raise RuntimeStartError(f"cannot prepare task {launch.key}: {e}") from e
        try:
            self._spawn(td)
        except RuntimeStartError:
            self._release_network(launch.key)
            raise

    def _release_network(self, key: str) -> None:
        """A start that failed gives its network namespace back (a sweep retries on error)."""
        try:
            self.network.release(key)
        except OSError as e:
            log.warning("could not release the network of %s: %s", key, e)

    def claim_addresses(self, keys: list[str]) -> dict[str, str]:
        """Key → the address of the network namespace held for that task (made or taken from
        the spare pool now; the same on a second call), so that a job's tasks can be told
        their peers' addresses before they start."""
        return self.network.claim(keys)

    def set_cluster(self, members: list[tuple[str, str]]) -> None:
        """Every node's (task subnet, address): routes to the other nodes' task subnets."""
        self.network.set_cluster(members)

    def _spawn(self, td: TaskDir) -> None:
        """Have the supervisor forked (zygote, else a fresh Python); returns once it is recorded."""
        code = self._spawn_by_zygote(td) if self._fork_supervisors else None
        if code is None:
            code = self._spawn_by_exec(td)
        if code != 0 or td.supervisor() is None:
            detail = tail_lines(td.supervisor_log, 10)
            _discard(td)
            raise RuntimeStartError(
                f"the supervisor of {td.key} failed to start (exit {code}): {detail}"
            )

    def _spawn_by_zygote(self, td: TaskDir) -> int | None:
        """0 once the zygote's supervisor is recorded, else 1; None if it cannot be used."""
        with self._zygote_lock:
            try:
                if self._zygote is None or not self._zygote.alive:
                    self._zygote = Zygote(self.state_root / "zygote.log")
                zygote = self._zygote
            except ZygoteError as e:
                log.warning("%s; starting supervisors the slow way", e)
                return None
        try:
            return zygote.spawn(td.path)
        except ZygoteError as e:
            log.warning("%s; it will be restarted", e)
            with self._zygote_lock:
                if self._zygote is zygote:
                    self._zygote = None
            zygote.close()
            if isinstance(e, ZygoteLost):  # asked: never a second supervisor for one task
                return 0 if td.supervisor() else 1
            return None

    def _spawn_by_exec(self, td: TaskDir) -> int:
        """Run `python -m gpuyard.runtime.supervisor`; its middle process's exit code."""
        cmd = [sys.executable, "-m", "gpuyard.runtime.supervisor", str(td.path)]
        try:
            with open(td.supervisor_log, "ab") as out:
                proc = subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=out,
                    cwd="/",
                    start_new_session=True,
                    close_fds=True,
                )
            if not wait_pid_ready(proc.pid, SPAWN_TIMEOUT_S):  # exact, not a polling wait
                raise subprocess.TimeoutExpired(cmd, SPAWN_TIMEOUT_S)
            return proc.wait()
        except (OSError, subprocess.TimeoutExpired) as e:
            if isinstance(e, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()
            _discard(td)
            raise RuntimeStartError(f"cannot spawn the supervisor of {td.key}: {e}") from e

    # --- observing --------------------------------------------------------------------------

    def _supervisor_alive(self, td: TaskDir) -> bool | None:
        """True/False if the recorded supervisor is alive, None if none is recorded."""
        sup = td.supervisor()
        if sup is None:
            return None
        pid, starttime = sup
        return process_starttime(pid) == starttime

    def status(self, key: str) -> TaskStatus:
        td = self.task_dir(key)
        if not td.path.is_dir():
            return TaskStatus(key, TaskPhase.UNKNOWN)
        exit_ = td.read_exit()
        if exit_ is None:
            alive = self._supervisor_alive(td)
            detail = self.waiting.detail(td) if alive is None else None
            if detail is not None:  # waits for its image
                return TaskStatus(key, TaskPhase.STARTING, detail=detail)
            if alive or (alive is None and not self._spawn_lost(td)):
                phase = TaskPhase.RUNNING if td.started.exists() else TaskPhase.STARTING
                return TaskStatus(key, phase, td.started_at())
            exit_ = td.read_exit() or self._record_lost(td)
        return TaskStatus(key, TaskPhase.EXITED, td.started_at(), exit_)

    def _spawn_lost(self, td: TaskDir) -> bool:
        """No supervisor recorded, long after the dir was made: a start that died midway."""
        with contextlib.suppress(OSError):
            return time.time() - td.path.stat().st_mtime > ORPHAN_AFTER_S
        return True

    def _record_lost(self, td: TaskDir) -> TaskExit:
        """The supervisor is gone without an exit: end the container, record AgentError."""
        self._force_delete(td)
        with contextlib.suppress(OSError):
            release_task_mounts(td.path)
        sup = td.supervisor()
        who = f"pid {sup[0]}" if sup else "never recorded"
        message = with_log(
            f"the task's supervisor ({who}) ended without recording an exit "
            "(killed, or the node restarted); its container was removed",
            td.log,
        )
        exit_ = TaskExit(
            None, TaskReason.AGENT_ERROR, time.time(), message, stop_requested=td.stop_file.exists()
        )
        td.write_exit(exit_)
        self._release_network(td.key)
        return exit_

    def _force_delete(self, td: TaskDir) -> None:
        """`<rt> delete --force` the task's container if its runtime still knows it."""
        spec = read_json(td.task)
        rt = OciRuntime.from_json(spec["runtime"]) if isinstance(spec, dict) else self.rt
        if not (Path(rt.root) / td.key).exists():
            return
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run(
                rt.command("delete", "--force", td.key),
                capture_output=True,
                timeout=SPAWN_TIMEOUT_S,
                check=False,
            )

    def watch(self, on_change: Callable[[], None]) -> None:
        """Call `on_change` whenever a task of this node starts or exits (a hint; see notify).

        Without the hint socket (another server holds this state root) the caller still
        sees every change, at its next poll.
        """
        if self._listener is not None:
            return
        try:
            self._listener = NotifyListener(self.state_root, lambda _event, _key: on_change())
        except OSError as e:
            log.warning(
                "no start/exit hints for %s (%s); changes are seen by polling", self.state_root, e
            )

    def close(self) -> None:
        self.network.close()  # its spares; its rules and bridge too once no task holds one
        self.waiting.close()
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        with self._zygote_lock:
            zygote, self._zygote = self._zygote, None
        if zygote is not None:
            zygote.close()

    def keys(self) -> list[str]:
        """Tasks whose state dir exists on this node (for adoption after a restart)."""
        try:
            names = [e.name for e in os.scandir(self.tasks_dir) if e.is_dir()]
        except OSError:
            return []
        return sorted(n for n in names if _valid_key(n))

    # --- stopping and cleaning up ------------------------------------------------------------

    def stop(self, key: str, grace_s: float) -> None:
        """Ask the supervisor to SIGTERM the task, then SIGKILL it after `grace_s`."""
        td = self.task_dir(key)
        if not td.path.is_dir() or td.exit_file.exists() or self.waiting.cancel(td):
            return
        grace = max(0.0, float(grace_s))
        earlier = td.stop_grace()
        if earlier is not None:
            grace = min(grace, earlier)
        write_json(td.stop_file, {"graceS": grace, "requestedAt": time.time()})
        sup = td.supervisor()
        if sup is not None:
            _signal_process(sup[0], sup[1], signal.SIGTERM)

    def remove(self, key: str) -> None:
        """Delete the task's state dir; its log is kept in `<state_root>/logs/<key>.log`.

        The task must have ended (TaskStillRunning otherwise). Archived logs stay readable
        through `read_log`/`tail_log` until `prune_logs` removes them.
        """
        td = self.task_dir(key)
        if not td.path.exists():
            self.mps.release(key)  # a start that failed after taking its MPS daemon
            return
        if not td.exit_file.exists() and (self._supervisor_alive(td) or self.waiting.waits(td)):
            raise TaskStillRunning(f"task {key} is still running; stop it first")
        self.mps.release(key)
        self._force_delete(td)
        self.network.release(key)
        release_task_mounts(td.path)
        archived = self.logs_dir / f"{key}.log"
        with contextlib.suppress(FileNotFoundError):
            os.replace(td.log, archived)
        with contextlib.suppress(FileNotFoundError):  # how much it dropped, if it did
            os.replace(dropped_file(td.log), dropped_file(archived))
        remove_unmounted(td.path)

    def prune_logs(self, older_than_s: float) -> int:
        """Delete archived logs not written for `older_than_s` seconds; how many went."""
        cutoff, removed = time.time() - older_than_s, 0
        for entry in os.scandir(self.logs_dir):
            with contextlib.suppress(OSError):
                if entry.stat().st_mtime < cutoff:
                    os.unlink(entry.path)
                    removed += 1
        return removed

    # --- logs ------------------------------------------------------------------------------

    def log_path(self, key: str) -> Path:
        """The task's log: in its state dir, or archived once the task was removed."""
        live = self.task_dir(key).log
        archived = self.logs_dir / f"{key}.log"
        return archived if not live.exists() and archived.exists() else live

    def read_log(self, key: str, offset: int = 0, limit: int = 1 << 20) -> bytes:
        """At most `limit` bytes (capped at 8 MiB) of the log from `offset`; b"" if none."""
        limit = max(0, min(limit, MAX_LOG_READ))
        try:
            with open(self.log_path(key), "rb") as f:
                f.seek(max(0, offset))
                return f.read(limit)
        except FileNotFoundError:
            return b""

    def log_dropped(self, key: str) -> int:
        """How many bytes of output the log dropped from its middle (0: it is whole)."""
        return dropped_bytes(self.log_path(key))

    def log_size(self, key: str) -> int:
        """The log's length in bytes (0 if there is none yet): where a follow starts."""
        try:
            return self.log_path(key).stat().st_size
        except FileNotFoundError:
            return 0

    def tail_log(self, key: str, lines: int) -> str:
        """The last `lines` lines of the log (from its last MiB at most)."""
        return tail_lines(self.log_path(key), lines, TAIL_READ)


def _discard(td: TaskDir) -> None:
    """Undo a start that failed midway: its mounts, then its dir (kept if one stays mounted)."""
    try:
        release_task_mounts(td.path)
        remove_unmounted(td.path)
    except OSError as e:
        log.error("left %s in place: %s", td.path, e)


def _valid_key(name: str) -> bool:
    try:
        check_key(name)
    except ValueError:
        return False
    return True


def _signal_process(pid: int, starttime: int, signum: int) -> None:
    """Signal `pid` only if it is still the process that started at `starttime`."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        if process_starttime(pid) == starttime:
            signal.pidfd_send_signal(pidfd, signum)
    except ProcessLookupError:
        pass
    finally:
        os.close(pidfd)
