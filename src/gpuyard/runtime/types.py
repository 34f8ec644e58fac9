"""Values that cross the runtime boundary: what to launch, and how a task ended."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from gpuyard.model import GpuDevice
from gpuyard.model.registries import RegistryLogin
from gpuyard.model.storage import StorageMount


@dataclass(frozen=True, slots=True)
class TaskPeer:
    """One task of the same job attempt, as every task sees it (`env.distributed_env`).

    `ports`: label → the ports reserved for that task on its node (`master` on rank 0 is
    MASTER_PORT). Peers are listed in rank order: roles in spec order, then index.
    """

    role: str
    index: int
    node: str
    address: str
    ports: tuple[tuple[str, tuple[int, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class SshLaunch:
    """sshd in a task (OpenPAI's ssh plugin; runtime/sshd.py). Keys are Ed25519 seeds, base64:
    `host_seed` the job's host key, `job_seed` the job's user key (empty: the job's tasks do
    not trust each other); `authorized_keys` the user's public keys. Secret as the env is:
    launch.json is 0600 in the node's 0700 state dir, and the repr hides the seeds."""

    host_seed: str = field(repr=False)
    job_seed: str = field(default="", repr=False)
    authorized_keys: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()  # the roles whose tasks run sshd (empty: all)
    barrier_s: int = 0  # > 0: wait until every sshd of the job answers, at most this long
    required: bool = True  # a sshd that does not start fails the task


@dataclass(frozen=True, slots=True)
class TaskLaunch:
    """Everything a node needs to run one task of one attempt of a job.

    `key` is unique per task attempt (it names the container, its cgroup and its state dir).
    """

    key: str
    job_id: str
    job_name: str
    role: str
    index: int
    attempt: int
    command: str  # run as `/bin/sh -c command`
    cpu: float
    memory_mb: int
    gpus: tuple[GpuDevice, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # the user's env from the spec
    data_dir: str | None = None  # host path, mounted read-only at /data
    output_dir: str | None = None  # host path, mounted read-write at /output
    image: str | None = None  # None: the host's root filesystem, read-only
    pids_limit: int = 4096
    role_task_counts: tuple[tuple[str, int], ...] = field(default=())  # role → taskNumber
    # platform variables the spec decides (OpenPAI's job and role names, spec/paienv.py)
    job_env: tuple[tuple[str, str], ...] = ()
    resumed: bool = False  # a later attempt: a checkpoint in /output may be waiting
    run_as: tuple[int, int] = (0, 0)  # uid, gid of the task's processes in the container
    # the tenant's id block: where the node can, the task runs in a user namespace that maps
    # container ids 0-65535 onto it (root in the container; runtime/userns.py)
    userns_base: int | None = None
    gpu_memory_mb: int = 0  # > 0: a share of gpus[0], run under MPS (runtime/mps.py)
    gpu_compute_percent: int | None = None  # MPS active thread percentage of a shared task
    peers: tuple[TaskPeer, ...] = ()  # every task of the attempt in rank order, this one too
    # the syscall filter: "default" (Docker's profile, runtime/seccomp.py) or "unconfined"
    seccomp: str = "default"
    # "isolated": a network namespace of its own (runtime/tasknet.py); "host": the node's
    # (`hostNetwork: true`, a tenant permission)
    network: str = "isolated"
    allow_internet: bool = False  # may it reach beyond the cluster (its tenant's setting)?
    log_limit_mb: int = 100  # the log keeps its head and tail within this (runtime/logcap.py)
    # /workspace and an image root's writes, MiB each (None: memory_mb; 0: no quota), diskquota.py
    workspace_mb: int | None = None
    # the tenant's storage roots: data_dir and output_dir are walked beneath one at launch
    storage_roots: tuple[str, ...] = ()
    # the login the node pulls `image` with (the job's, else its tenant's, for the image's
    # registry); None: no credentials at all, not even the node's (runtime/registryauth.py)
    image_login: RegistryLogin | None = None
    ssh: SshLaunch | None = None  # sshd in the task (runtime/sshd.py)
    # the tenant's named storage the job asked for (`storage`, OpenPAI's teamwise_storage):
    # each walked beneath `storage_roots` at launch and pinned as data_dir is (hostdirs.py)
    storage: tuple[StorageMount, ...] = ()


class TaskPhase(enum.StrEnum):
    STARTING = "starting"  # supervisor launched, container not yet started
    RUNNING = "running"
    EXITED = "exited"  # exit.json written
    UNKNOWN = "unknown"  # no such task on this node, or its supervisor vanished without exit


@dataclass(frozen=True, slots=True)
class TaskExit:
    exit_code: int | None
    reason: str  # a TaskReason: Completed, Error(exit N), OOMKilled, Signal(SIGx), ...
    finished_at: float
    message: str = ""  # last lines of the log, or what went wrong
    stop_requested: bool = False  # the task ended after a stop request (ContainerRuntime.stop)


@dataclass(frozen=True, slots=True)
class TaskStatus:
    key: str
    phase: TaskPhase
    started_at: float | None = None
    exit: TaskExit | None = None
    detail: str | None = None  # STARTING: what the start waits for ("pulling image X ...")
