"""The OCI runtime spec (config.json) of one task.

What a task gets:

- its own pid, mount, uts (hostname `<role>-<index>`), ipc and network namespaces: a new,
  empty network namespace here, which the node replaces with the task's own (on the node's
  bridge, with its address and rules: `tasknet.py`); a `hostNetwork` task (`network="host"`)
  keeps the host's.
- cgroup `/gpuyard/<key>`: memory limit = memory_mb, and memory+swap = the same where swap is
  accounted (no swap escape); CPU quota = cpu × period (shares in proportion); pids limit;
  devices: deny all but runc's default set (`devices.py`; a task's real GPUs are added to it by
  `gpusetup.apply_gpu_setup`).
- the root from a `RootfsSource` (host root read-only, or an image's copy-on-write overlay),
  `/data` read-only, `/output` read-write, the tenant's named storage at its mount points
  below /mnt, read-only or not as its admin set it (all bound from what `hostdirs` pinned at
  launch, never from a path; a host root gets a tmpfs /mnt to hold the mount points), a
  private writable `/workspace` (a tmpfs of the task's disk quota, `diskquota.py`; its HOME,
  and its cwd unless the image has a WorkingDir), private tmpfs /tmp, and a /dev/shm as large as its
  memory limit (tmpfs pages count against it anyway).
- the job's hosts file (`write_hosts_files`): `<address> <role>-<index>` for every task of the
  attempt, at `/run/gpuyard/hosts` (`env.HOSTS_FILE`), and the same lines after the localhost
  ones as the container's `/etc/hosts`, so that `worker-1` resolves to its node's address.
- `/bin/sh -c <command>` with the env of `env.build_env` (an image's Env under the job's), no
  terminal, the capabilities of `runc spec`, `noNewPrivileges`, Docker's default seccomp
  profile (`seccomp.py`: no mount, no new namespaces, user namespaces included, no bpf or
  keyctl; a platform admin may run a tenant unconfined), and the default masked and
  read-only /proc paths. An image's User applies only where the platform lets the task run as
  root (otherwise the platform's user wins).
"""

from __future__ import annotations

import resource
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuyard.model.storage import MOUNT_PARENT
from gpuyard.runtime.cgroups import swap_accounting
from gpuyard.runtime.devices import default_cgroup_devices
from gpuyard.runtime.diskquota import workspace_mount
from gpuyard.runtime.env import HOSTS_FILE, WORKDIR, build_env, hostname_of, hosts_text
from gpuyard.runtime.hostdirs import storage_field
from gpuyard.runtime.imageconfig import ImageConfig, process_args
from gpuyard.runtime.rootfs import Mount, Rootfs, bind, tmpfs
from gpuyard.runtime.seccomp import UNCONFINED, task_seccomp
from gpuyard.runtime.types import TaskLaunch
from gpuyard.runtime.userns import TaskIds, task_ids

MB = 1024 * 1024
CPU_PERIOD_US = 100_000
NOFILE = 65536
CAPABILITIES = ["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"]  # runc spec's set
# root in a user namespace (userns.py): Docker's default set, what apt-get, pip and chown need;
# each is the namespace's only (over files of the tenant's block, its own mounts and ids)
MAPPED_CAPABILITIES = [
    "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
    "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
]  # fmt: skip
MASKED_PATHS = [
    "/proc/acpi",
    "/proc/asound",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/sys/firmware",
    "/proc/scsi",
]
JOB_HOSTS_DIR = "gpuyard"  # in the task's state dir, mounted at /run/gpuyard: `hosts`
ETC_HOSTS = "etc-hosts"  # in the task's state dir: the container's /etc/hosts
LOCALHOST_LINES = "127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n"
READONLY_PATHS = ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]
CGROUP_PARENT = "/gpuyard"  # every task's cgroup is `/gpuyard/<key>`


def cgroup_path(key: str, parent: str = CGROUP_PARENT) -> str:
    """The task's cgroup: under gpuyard's parent, whose pids.max fences the node (`pidfence`)."""
    return f"{parent}/{key}"


def hostname(role: str, index: int) -> str:
    """`<role>-<index>` as a valid host name (lower case letters, digits, `-`; 63 at most)."""
    return hostname_of(role, index)


def file_bind(source: str, destination: str) -> Mount:
    """A read-only bind of one file (crun refuses `rro`, a recursive option, on a file)."""
    options = ["bind", "ro", "nosuid", "nodev", "noexec"]
    return {"type": "bind", "source": source, "destination": destination, "options": options}


def write_hosts_files(task_dir: Path, launch: TaskLaunch) -> None:
    """The job's hosts file and the container's /etc/hosts, into the task's state dir."""
    job_hosts = hosts_text(launch)
    (task_dir / JOB_HOSTS_DIR).mkdir(exist_ok=True)
    (task_dir / JOB_HOSTS_DIR / Path(HOSTS_FILE).name).write_text(job_hosts)
    (task_dir / ETC_HOSTS).write_text(LOCALHOST_LINES + job_hosts)


def hosts_mounts(task_dir: Path, readonly_root: bool) -> list[Mount]:
    """Read-only binds of the files `write_hosts_files` wrote (/etc/hosts only where it can
    be mounted: a read-only host root without one cannot grow it)."""
    hosts_dir = str(Path(HOSTS_FILE).parent)  # a dir: crun cannot create a file target there
    mounts = [bind(str(task_dir / JOB_HOSTS_DIR), hosts_dir, readonly=True)]
    if not readonly_root or Path("/etc/hosts").exists():
        mounts.append(file_bind(str(task_dir / ETC_HOSTS), "/etc/hosts"))
    return mounts


def system_mounts(memory_mb: int) -> list[Mount]:
    """/proc, /dev and friends, as `runc spec` has them (without /sys/fs/cgroup)."""
    shm = max(64, memory_mb)
    return [
        {"destination": "/proc", "type": "proc", "source": "proc"},
        {
            "destination": "/dev",
            "type": "tmpfs",
            "source": "tmpfs",
            "options": ["nosuid", "strictatime", "mode=755", "size=65536k"],
        },
        {
            "destination": "/dev/pts",
            "type": "devpts",
            "source": "devpts",
            "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"],
        },
        {
            "destination": "/dev/shm",
            "type": "tmpfs",
            "source": "shm",
            "options": ["nosuid", "noexec", "nodev", "mode=1777", f"size={shm}m"],
        },
        {
            "destination": "/dev/mqueue",
            "type": "mqueue",
            "source": "mqueue",
            "options": ["nosuid", "noexec", "nodev"],
        },
        {
            "destination": "/sys",
            "type": "sysfs",
            "source": "sysfs",
            "options": ["nosuid", "noexec", "nodev", "ro"],
        },
    ]


def task_mounts(
    work_dir: Path, pinned: Mapping[str, str], workspace: Mount | None = None
) -> list[Mount]:
    """/workspace (`workspace`: a tmpfs of the task's quota, `diskquota.py`; else `work_dir`
    bound), and the host dirs `hostdirs.mount_host_dirs` pinned (field → pinned path)."""
    mounts = [workspace or bind(str(work_dir), WORKDIR, readonly=False)]
    if "dataDir" in pinned:
        mounts.append(bind(pinned["dataDir"], "/data", readonly=True))
    if "outputDir" in pinned:
        mounts.append(bind(pinned["outputDir"], "/output", readonly=False))
    return mounts


def storage_mounts(
    launch: TaskLaunch, pinned: Mapping[str, str], readonly_root: bool
) -> list[Mount]:
    """The named storage `hostdirs.mount_host_dirs` pinned, each at its mount point (below
    /mnt: on a read-only host root, a tmpfs /mnt first, to hold the mount points)."""
    mounts = [
        bind(pinned[storage_field(m.name)], m.mount_point, readonly=m.read_only)
        for m in launch.storage
        if storage_field(m.name) in pinned
    ]
    if mounts and readonly_root:
        mounts.insert(0, tmpfs(MOUNT_PARENT, "mode=0755"))
    return mounts


def resources(launch: TaskLaunch) -> dict[str, Any]:
    limit = launch.memory_mb * MB
    memory: dict[str, Any] = {"limit": limit}
    if swap_accounting():
        memory["swap"] = limit
    out: dict[str, Any] = {
        "devices": default_cgroup_devices(),
        "memory": memory,
        "pids": {"limit": launch.pids_limit},
    }
    if launch.cpu > 0:
        out["cpu"] = {
            "quota": max(1000, round(launch.cpu * CPU_PERIOD_US)),
            "period": CPU_PERIOD_US,
            "shares": max(2, round(launch.cpu * 1024)),
        }
    return out


def nofile_limit() -> int:
    """65536 open files, or this process's hard limit if lower (raising it needs a cap)."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return NOFILE if hard == resource.RLIM_INFINITY else min(NOFILE, hard)


def task_capabilities(ids: TaskIds) -> list[str]:
    """The bounding set: Docker's in a user namespace, else runc's three."""
    return list(MAPPED_CAPABILITIES if ids.base is not None else CAPABILITIES)


def capabilities(uid: int, bounding: list[str] | None = None) -> dict[str, list[str]]:
    """root gets the whole bounding set (runc's default set unless given); any other user
    none (only the bounding set stays)."""
    caps = list(bounding if bounding is not None else CAPABILITIES)
    if uid == 0:
        return {kind: list(caps) for kind in ("bounding", "effective", "permitted", "ambient")}
    return {"bounding": caps, "effective": [], "permitted": [], "ambient": []}


def namespaces(launch: TaskLaunch, ids: TaskIds | None = None) -> tuple[str, ...]:
    """The task's own namespaces: all but the network one for a host-network task, and a
    user namespace where its ids are mapped (`userns.py`)."""
    own: tuple[str, ...] = ("pid", "ipc", "uts", "mount")
    if ids is not None and ids.base is not None:
        own = ("user", *own)
    return own if launch.network == "host" else (*own, "network")


def syscall_filter(launch: TaskLaunch, bounding: list[str] | None = None) -> dict[str, Any]:
    """`{"seccomp": ...}`: Docker's profile resolved for the task's capabilities (`seccomp.py`),
    or nothing where its tenant runs unconfined. The bounding set is what the profile's
    capability rules are read against: a process cannot gain a capability outside it."""
    if launch.seccomp == UNCONFINED:
        return {}
    return {"seccomp": task_seccomp(bounding if bounding is not None else CAPABILITIES)}


def process(launch: TaskLaunch, image: ImageConfig | None, ids: TaskIds) -> dict[str, Any]:
    """The task's process: its ids in the container (`userns.task_ids`), command, env."""
    nofile = nofile_limit()
    uid, gid = ids.uid, ids.gid
    return {
        "terminal": False,
        "user": {"uid": uid, "gid": gid},
        "args": process_args(image, launch.command) if image else ["/bin/sh", "-c", launch.command],
        "env": build_env(launch, image.env if image else ()),
        "cwd": (image.workdir if image else "") or WORKDIR,
        "capabilities": capabilities(uid, task_capabilities(ids)),
        "rlimits": [{"type": "RLIMIT_NOFILE", "hard": nofile, "soft": nofile}],
        "noNewPrivileges": True,
    }


def build_config(
    launch: TaskLaunch,
    rootfs: Rootfs,
    work_dir: Path,
    hosts_dir: Path | None = None,
    pinned: Mapping[str, str] | None = None,
    cgroup_parent: str = CGROUP_PARENT,
    ids: TaskIds | None = None,
) -> dict[str, Any]:
    """The whole config.json for `launch`, rooted at `rootfs`; with the hosts files that
    `write_hosts_files` wrote into `hosts_dir`, if given, and the host dirs pinned for it;
    in a user namespace where `ids` map one (None: the launch's ids, no namespace)."""
    ids = ids or task_ids(launch, rootfs.image, userns=False)
    proc = process(launch, rootfs.image, ids)
    workspace = workspace_mount(launch, proc["user"]["uid"], proc["user"]["gid"])
    mounts = system_mounts(launch.memory_mb) + list(rootfs.mounts)
    mounts += task_mounts(work_dir, pinned or {}, workspace)
    mounts += storage_mounts(launch, pinned or {}, rootfs.readonly)
    if hosts_dir is not None:
        mounts += hosts_mounts(hosts_dir, rootfs.readonly)
    return {
        "ociVersion": "1.0.2",
        "process": proc,
        "root": {"path": str(rootfs.path), "readonly": rootfs.readonly},
        "hostname": hostname(launch.role, launch.index),
        "mounts": mounts,
        "linux": {
            "resources": resources(launch),
            "cgroupsPath": cgroup_path(launch.key, cgroup_parent),
            "namespaces": [{"type": t} for t in namespaces(launch, ids)],
            **ids.oci_mappings(),
            "maskedPaths": [*MASKED_PATHS, *rootfs.masked],
            "readonlyPaths": list(READONLY_PATHS),
            **syscall_filter(launch, task_capabilities(ids)),
        },
    }
