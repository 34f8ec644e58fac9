"""The environment of a task's process: defaults, the image's Env, the user's, the platform's.

Later layers win: the image and the user may override the defaults (PATH, HOME, LANG) but never
the platform
variables, which describe the task (GPUYARD_*, the OpenPAI PAI_* names) and its GPUs:

- `NVIDIA_VISIBLE_DEVICES`: the task's GPU UUIDs, comma-separated, or `void` without a GPU
  (the NVIDIA container convention: `void` means no GPU at all, unlike an empty value).
- `CUDA_VISIBLE_DEVICES`: `0,1,...,n-1`. Only the task's GPUs are visible in the container,
  so CUDA numbers them from 0; empty when the task has no GPU.

`NVIDIA_DRIVER_CAPABILITIES` (which driver libraries the NVIDIA hook mounts) is the user's, else
the image's, else `compute,utility` for a task with GPUs; unknown capabilities are refused.
CDI edits may set variables too, but never the platform's (`is_platform_env`).

A task of a job (`distributed_env`, from `launch.peers`, every task of the attempt in rank
order: roles in spec order, then index) also gets the PyTorch/torchrun names and OpenPAI's:
`MASTER_ADDR` (the address of rank 0's node), `MASTER_PORT` (rank 0's `master` port),
`WORLD_SIZE`, `RANK`, `LOCAL_RANK` (rank among the job's tasks on this node),
`LOCAL_WORLD_SIZE`, `PAI_HOST_IP_<role>_<index>`, `PAI_PORT_LIST_<role>_<index>_<label>`
(comma-separated), `PAI_CURRENT_CONTAINER_IP` and `GPUYARD_HOSTS_FILE`. These are platform
variables too: a user's env cannot override them.

OpenPAI's other names (`openpai_peer_env`, as its runtime's parser.py writes them):
`PAI_TASK_ROLE_<role>_HOST_LIST` (`address:http-port` of each task of the role, comma-separated;
the address alone for a task without an `http` port), `PAI_CONTAINER_HOST_<label>_PORT_LIST`
(this task's ports of a label), `PAI_CONTAINER_HOST_PORT_LIST` (`label:ports;` for each),
`PAI_CONTAINER_HOST_IP`, `PAI_CONTAINER_HOST_PORT` / `PAI_CURRENT_CONTAINER_PORT` (its first
http port), `PAI_CONTAINER_SSH_PORT`, `PAI_<role>_<index>_<label>_PORT` and
`PAI_TASK_ROLE_INSTANCES` (`role:index,...`). `PAI_WORK_DIR` is the task's working dir
(/workspace). The job- and role-level ones (`PAI_USER_NAME`, `PAI_RESOURCE_<role>`,
`PAI_MIN_FAILED_TASK_COUNT_<role>`, ...) come with the launch (`launch.job_env`, from
spec/paienv.py).
"""

from __future__ import annotations

import re

from gpuyard.runtime.types import TaskLaunch, TaskPeer

WORKDIR = "/workspace"  # the task's private writable dir and cwd, also its HOME
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
PLATFORM_PREFIXES = ("GPUYARD_", "PAI_")
PLATFORM_NAMES = frozenset(
    {
        "NVIDIA_VISIBLE_DEVICES",
        "CUDA_VISIBLE_DEVICES",
        "MASTER_ADDR",
        "MASTER_PORT",
        "WORLD_SIZE",
        "RANK",
        "LOCAL_RANK",
        "LOCAL_WORLD_SIZE",
    }
)
HOSTS_FILE = "/run/gpuyard/hosts"  # `<address> <role>-<index>` per task of the job
MASTER_PORT_LABEL = "master"
HTTP_PORT_LABEL = "http"  # OpenPAI's host lists name each task's first http port
CAPABILITIES_VAR = "NVIDIA_DRIVER_CAPABILITIES"
DEFAULT_DRIVER_CAPABILITIES = "compute,utility"
DRIVER_CAPABILITIES = frozenset(
    {"all", "compute", "compat32", "graphics", "utility", "video", "display", "ngx"}
)


def is_platform_env(name: str) -> bool:
    """A variable that describes the task and its GPUs: only the platform sets it."""
    return name in PLATFORM_NAMES or name.startswith(PLATFORM_PREFIXES)


def driver_capabilities(value: str) -> str:
    """`value` checked (comma-separated known capabilities); blank means the default."""
    names = [n.strip() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in DRIVER_CAPABILITIES]
    if unknown:
        known = ", ".join(sorted(DRIVER_CAPABILITIES))
        raise ValueError(f"unknown {CAPABILITIES_VAR} {', '.join(unknown)}: expected {known}")
    return ",".join(names) or DEFAULT_DRIVER_CAPABILITIES


def default_env() -> dict[str, str]:
    return {"PATH": DEFAULT_PATH, "HOME": WORKDIR, "LANG": "C.UTF-8"}


def gpu_env(launch: TaskLaunch) -> dict[str, str]:
    uuids = [g.uuid for g in launch.gpus]
    return {
        "NVIDIA_VISIBLE_DEVICES": ",".join(uuids) if uuids else "void",
        "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in range(len(uuids))),
        "GPUYARD_GPU_UUIDS": ",".join(uuids),
    }


def env_name_part(role: str) -> str:
    """A role name as a usable part of a variable name (other characters become `_`)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", role)


def task_env(launch: TaskLaunch) -> dict[str, str]:
    roles = [role for role, _ in launch.role_task_counts] or [launch.role]
    env = {
        "GPUYARD_JOB_ID": launch.job_id,
        "GPUYARD_JOB_NAME": launch.job_name,
        "GPUYARD_TASK_ROLE": launch.role,
        "GPUYARD_TASK_INDEX": str(launch.index),
        "GPUYARD_ATTEMPT": str(launch.attempt),
        "GPUYARD_RESUMED": "1" if launch.resumed else "0",
        "PAI_JOB_NAME": launch.job_name,
        "PAI_CURRENT_TASK_ROLE_NAME": launch.role,
        "PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX": str(launch.index),
        "PAI_TASK_INDEX": str(launch.index),
        "PAI_TASK_ROLE_COUNT": str(len(roles)),
        "PAI_TASK_ROLE_LIST": ",".join(roles),
        "PAI_WORK_DIR": WORKDIR,
    }
    for role, count in launch.role_task_counts:
        env[f"PAI_TASK_ROLE_TASK_COUNT_{env_name_part(role)}"] = str(count)
    return env


def distributed_env(launch: TaskLaunch) -> dict[str, str]:
    """Rank, world and peer addresses of a job's task; empty for a launch without peers."""
    peers = launch.peers
    if not peers:
        return {}
    ranks = [(p.role, p.index) for p in peers]
    rank = ranks.index((launch.role, launch.index))
    me, master = peers[rank], peers[0]
    local = [p for p in peers if p.node == me.node]
    env = {
        "MASTER_ADDR": master.address,
        "WORLD_SIZE": str(len(peers)),
        "RANK": str(rank),
        "LOCAL_RANK": str(local.index(me)),
        "LOCAL_WORLD_SIZE": str(len(local)),
        "PAI_CURRENT_CONTAINER_IP": me.address,
        "GPUYARD_HOSTS_FILE": HOSTS_FILE,
    }
    master_ports = dict(master.ports).get(MASTER_PORT_LABEL)
    if master_ports:
        env["MASTER_PORT"] = str(master_ports[0])
    for p in peers:
        name = f"{env_name_part(p.role)}_{p.index}"
        env[f"PAI_HOST_IP_{name}"] = p.address
        for label, ports in p.ports:
            env[f"PAI_PORT_LIST_{name}_{env_name_part(label)}"] = ",".join(map(str, ports))
            env[f"PAI_{name}_{env_name_part(label)}_PORT"] = ",".join(map(str, ports))
    env.update(openpai_peer_env(launch, me))
    return env


def _http_address(peer: TaskPeer) -> str:
    http = dict(peer.ports).get(HTTP_PORT_LABEL)
    return f"{peer.address}:{http[0]}" if http else peer.address


def openpai_peer_env(launch: TaskLaunch, me: TaskPeer) -> dict[str, str]:
    """OpenPAI's host lists and this task's port variables (see the module's docstring)."""
    hosts: dict[str, list[str]] = {}
    for p in launch.peers:
        hosts.setdefault(env_name_part(p.role), []).append(_http_address(p))
    env = {f"PAI_TASK_ROLE_{role}_HOST_LIST": ",".join(h) for role, h in hosts.items()}
    env["PAI_TASK_ROLE_INSTANCES"] = ",".join(f"{p.role}:{p.index}" for p in launch.peers)
    env["PAI_CONTAINER_HOST_IP"] = me.address
    mine = {label: ",".join(map(str, ports)) for label, ports in me.ports}
    for label, text in mine.items():
        env[f"PAI_CONTAINER_HOST_{env_name_part(label)}_PORT_LIST"] = text
    env["PAI_CONTAINER_HOST_PORT_LIST"] = "".join(f"{k}:{v};" for k, v in mine.items())
    first = {label: ports[0] for label, ports in me.ports if ports}
    for name, label in (("PAI_CONTAINER_HOST_PORT", "http"), ("PAI_CONTAINER_SSH_PORT", "ssh")):
        if label in first:
            env[name] = str(first[label])
    if HTTP_PORT_LABEL in first:
        env["PAI_CURRENT_CONTAINER_PORT"] = str(first[HTTP_PORT_LABEL])
    return env


def hosts_text(launch: TaskLaunch) -> str:
    """The job's hosts file: `<address> <role>-<index>` for every task, in rank order."""
    return "".join(f"{p.address} {hostname_of(p.role, p.index)}\n" for p in launch.peers)


def hostname_of(role: str, index: int) -> str:
    """`<role>-<index>` as a valid host name (lower case letters, digits, `-`; 63 at most)."""
    name = re.sub(r"[^a-z0-9-]+", "-", role.lower()).strip("-") or "task"
    suffix = f"-{index}"
    return name[: 63 - len(suffix)].rstrip("-") + suffix


def check_user_env(env: tuple[tuple[str, str], ...]) -> None:
    """ValueError for a name that a shell cannot use or a value with a NUL byte."""
    for name, value in env:
        if not NAME_RE.fullmatch(name):
            raise ValueError(f"bad env name {name!r}: expected letters, digits and _")
        if "\0" in value:
            raise ValueError(f"env {name} holds a NUL byte")


MPS_PIPE_DIR = "/run/nvidia-mps"  # the shared GPU's MPS pipe dir, bind-mounted (mps.py)
MPS_LOG_DIR = "/run/nvidia-mps-log"  # its MPS log dir, read-only


def mps_env(launch: TaskLaunch) -> dict[str, str]:
    """A shared-GPU task's MPS client settings (docs/gpu-sharing.md); empty otherwise.

    The limit names device 0: the shared GPU is the only one the task sees.
    """
    if not launch.gpu_memory_mb:
        return {}
    env = {
        "CUDA_MPS_PIPE_DIRECTORY": MPS_PIPE_DIR,
        "CUDA_MPS_LOG_DIRECTORY": MPS_LOG_DIR,
        "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": f"0={launch.gpu_memory_mb}M",
        "GPUYARD_GPU_MEMORY_LIMIT_MB": str(launch.gpu_memory_mb),
    }
    if launch.gpu_compute_percent is not None:
        env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(launch.gpu_compute_percent)
    return env


def build_env(launch: TaskLaunch, image_env: tuple[tuple[str, str], ...] = ()) -> list[str]:
    """`NAME=value` entries for the OCI config, platform variables last (they win)."""
    check_user_env(launch.env)
    env = default_env()
    env.update(dict(image_env))
    env.update(dict(launch.env))
    env.update(dict(launch.job_env))
    if launch.gpus:
        env[CAPABILITIES_VAR] = driver_capabilities(env.get(CAPABILITIES_VAR, ""))
    env.update(task_env(launch))
    env.update(distributed_env(launch))
    env.update(gpu_env(launch))
    env.update(mps_env(launch))
    return [f"{name}={value}" for name, value in env.items()]
