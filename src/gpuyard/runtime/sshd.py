"""sshd in a task (OpenPAI's ssh plugin): its keys, its user, its mounts and its start.

What a task of a job with `ssh` gets (docs/openpai.md, *ssh*; docs/security.md, *ssh*):

- **Keys.** The job's host key and the job's user key pair (Ed25519, from seeds the controller
  derives per job attempt, `SshLaunch`), written into `<task dir>/gpuyard/ssh/`, owned by the
  task's uid, 0700/0600, and bind-mounted read-only as the task's `~/.ssh` (`/workspace/.ssh`)
  and at `/run/gpuyard/ssh`: `authorized_keys` (the job's public key and the user's keys, and
  nothing else), `id_ed25519` / `.pub`, `config` (`Host worker-1 <address>`: its address and
  its sshd port) and `known_hosts` (every task's `[name]:port` and `[address]:port` with the
  job's host key: the client checks it, `StrictHostKeyChecking yes`).
- **User.** sshd needs the task's uid in `/etc/passwd` (and the client its name): the image's
  (or the host root's) passwd and group files with a line for the task's uid (`task`, home
  `/workspace`, shell `/bin/sh`), bind-mounted read-only over `/etc/passwd` and `/etc/group`.
- **Start.** The node's kit (`sshkit.py`) at `/run/gpuyard/sshd`; the task's process becomes
  `/bin/sh /run/gpuyard/sshd/init LISTEN REQUIRED BARRIER HOSTS -- <its args>`, which starts
  Dropbear as the task's own user (no capability, no root) on the task's own address and its
  `ssh` port only (`-p address:port`; and on the task's loopback, where `gpuyard ssh` reaches
  it through the platform's port stream), public keys only (`-s`), with the task's environment
  (`-e`: a session sees `PAI_*`, `PATH`, ...), then `exec`s the task's command. sshd dies with
  the task (its pid namespace).
"""

from __future__ import annotations

import base64
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization as ser
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gpuyard.runtime.env import WORKDIR, hostname_of
from gpuyard.runtime.errors import LaunchInvalid
from gpuyard.runtime.imageconfig import resolve_in_root
from gpuyard.runtime.oci import JOB_HOSTS_DIR, file_bind
from gpuyard.runtime.rootfs import Rootfs, bind
from gpuyard.runtime.sshkit import CONTAINER_DIR
from gpuyard.runtime.types import SshLaunch, TaskLaunch, TaskPeer
from gpuyard.runtime.userns import TaskIds

SSH_PORT_LABEL = "ssh"
KEYS = "ssh"  # in the task's hosts dir (oci.JOB_HOSTS_DIR)
KIT_POINT = "sshd"  # the kit's mount point in the task's hosts dir
PASSWD, GROUP = "etc-passwd", "etc-group"  # in the task dir
USER_NAME = "task"
SHELL = "/bin/sh"
LOOPBACK = "127.0.0.1"
MAX_ACCOUNTS_BYTES = 1024 * 1024  # an image's passwd or group file read at most this far


def _private(seed: str) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(base64.b64decode(seed))


def public_line(seed: str, comment: str = "") -> str:
    """The OpenSSH public key of an Ed25519 seed."""
    raw = _private(seed).public_key().public_bytes(ser.Encoding.OpenSSH, ser.PublicFormat.OpenSSH)
    return f"{raw.decode()} {comment}".strip()


def openssh_private(seed: str) -> bytes:
    key = _private(seed)
    return key.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.OpenSSH, ser.NoEncryption())


def dropbear_private(seed: str) -> bytes:
    """Dropbear's own key file format: string "ssh-ed25519", string (seed + public key)."""
    raw = base64.b64decode(seed)
    public = _private(seed).public_key().public_bytes(ser.Encoding.Raw, ser.PublicFormat.Raw)

    def string(data: bytes) -> bytes:
        return len(data).to_bytes(4, "big") + data

    return string(b"ssh-ed25519") + string(raw + public)


def runs_sshd(ssh: SshLaunch, role: str) -> bool:
    return not ssh.roles or role in ssh.roles


def _ssh_port(peer: TaskPeer) -> int | None:
    ports = dict(peer.ports).get(SSH_PORT_LABEL)
    return ports[0] if ports else None


def _servers(launch: TaskLaunch, ssh: SshLaunch) -> list[tuple[TaskPeer, int]]:
    """The job's tasks that run sshd, with their ssh ports."""
    out = []
    for p in launch.peers:
        port = _ssh_port(p)
        if runs_sshd(ssh, p.role) and port is not None:
            out.append((p, port))
    return out


def client_config(servers: list[tuple[TaskPeer, int]], user: str, job_keys: bool) -> str:
    """`Host <name> [<address>]` blocks: an address shared by two tasks (hostNetwork) is left
    out of the patterns (its port would be ambiguous)."""
    counts: dict[str, int] = {}
    for p, _ in servers:
        counts[p.address] = counts.get(p.address, 0) + 1
    blocks = []
    for p, port in servers:
        names = [hostname_of(p.role, p.index)] + ([p.address] if counts[p.address] == 1 else [])
        lines = [f"Host {' '.join(names)}", f"  HostName {p.address}", f"  Port {port}",
                 f"  User {user}", "  UserKnownHostsFile ~/.ssh/known_hosts",
                 "  StrictHostKeyChecking yes"]  # fmt: skip
        if job_keys:
            lines.append("  IdentityFile ~/.ssh/id_ed25519")
        blocks.append("\n".join(lines) + "\n")
    return "".join(blocks)


def known_hosts(servers: list[tuple[TaskPeer, int]], host_key: str) -> str:
    def pattern(host: str, port: int) -> str:
        return host if port == 22 else f"[{host}]:{port}"

    return "".join(
        f"{pattern(hostname_of(p.role, p.index), port)},{pattern(p.address, port)} {host_key}\n"
        for p, port in servers
    )


def _read_accounts(root: Rootfs, name: str) -> str:
    """The root's /etc/<name> (an image's: symlinks resolved inside it); empty if absent or
    not a regular file (a FIFO, a device)."""
    path = Path("/etc", name) if root.image is None else resolve_in_root(root.path, f"/etc/{name}")
    if path is None:
        return ""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    with open(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        return f.read(MAX_ACCOUNTS_BYTES).decode(errors="replace")


def accounts(passwd: str, group: str, uid: int, gid: int) -> tuple[str, str, str]:
    """(passwd, group, user name): `uid` given home /workspace and shell /bin/sh (its name
    kept if the file has it, else `task`), `gid` added to group if absent."""
    lines, name = [], None
    for line in passwd.splitlines():
        fields = line.split(":")
        if len(fields) >= 7 and fields[2] == str(uid):
            name = name or fields[0]
            continue
        lines.append(line)
    taken = {line.split(":", 1)[0] for line in lines}
    name = name or (USER_NAME if USER_NAME not in taken else f"{USER_NAME}{uid}")
    lines.append(f"{name}:x:{uid}:{gid}:gpuyard task:{WORKDIR}:{SHELL}")
    groups = group.splitlines()
    if not any(len(g.split(":")) >= 3 and g.split(":")[2] == str(gid) for g in groups):
        groups.append(f"{name}:x:{gid}:")
    return "\n".join(lines) + "\n", "\n".join(groups) + "\n", name


def _write(path: Path, data: str | bytes, uid: int, gid: int, mode: int = 0o600) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    with open(fd, "wb") as f:
        os.fchown(fd, uid, gid)
        os.fchmod(fd, mode)
        f.write(data.encode() if isinstance(data, str) else data)


def _key_files(ssh: SshLaunch, host_key: str) -> Iterable[tuple[str, str | bytes]]:
    authorized = list(ssh.authorized_keys)
    if ssh.job_seed:
        authorized.insert(0, public_line(ssh.job_seed, "gpuyard-job"))
        yield "id_ed25519", openssh_private(ssh.job_seed)
        yield "id_ed25519.pub", public_line(ssh.job_seed, "gpuyard-job") + "\n"
    yield "authorized_keys", "".join(f"{k}\n" for k in authorized)
    yield "sshd_host_key", dropbear_private(ssh.host_seed)
    yield "sshd_host_key.pub", host_key + "\n"


def write_ssh_files(task_dir: Path, launch: TaskLaunch, ssh: SshLaunch, user: str,
                    owner: tuple[int, int]) -> str:  # fmt: skip
    """The task's ssh dir (keys, config, known hosts), owned by `owner` (the task's host ids);
    gives the sshd's LISTEN addresses."""
    me = next((p for p in launch.peers if (p.role, p.index) == (launch.role, launch.index)), None)
    port = _ssh_port(me) if me is not None else None
    if me is None or port is None:
        raise LaunchInvalid(f"task {launch.key} runs sshd but has no {SSH_PORT_LABEL} port")
    uid, gid = owner
    keys = task_dir / JOB_HOSTS_DIR / KEYS
    keys.mkdir(mode=0o700)
    os.chown(keys, uid, gid)
    (task_dir / JOB_HOSTS_DIR / KIT_POINT).mkdir(mode=0o755)
    host_key = public_line(ssh.host_seed)
    servers = _servers(launch, ssh)
    for name, data in _key_files(ssh, host_key):
        _write(keys / name, data, uid, gid)
    _write(keys / "config", client_config(servers, user, bool(ssh.job_seed)), uid, gid)
    _write(keys / "known_hosts", known_hosts(servers, host_key), uid, gid)
    return listen_addresses(launch.network, me.address, port)


def listen_addresses(network: str, address: str, port: int) -> str:
    """Where sshd listens, comma-separated: the task's address, and its loopback (where
    `gpuyard ssh` reaches it through the platform, as port-forward does) unless the task is
    in its node's network (that loopback is the node's)."""
    listen = [f"{address}:{port}"]
    if network != "host" and address != LOOPBACK:
        listen.append(f"{LOOPBACK}:{port}")
    return ",".join(listen)


def prepare_ssh(config: dict[str, Any], task_dir: Path, launch: TaskLaunch, root: Rootfs,
                kit: Path, ids: TaskIds) -> None:  # fmt: skip
    """Make `config` (the task's OCI config, hosts files written) start sshd before its
    command, as the task's user (`ids`); nothing for a task whose role does not run sshd."""
    ssh = launch.ssh
    if ssh is None or not runs_sshd(ssh, launch.role):
        return
    if root.image is not None and not root.image.has_shell:
        raise LaunchInvalid(f"image {launch.image!r} has no /bin/sh to start sshd with")
    passwd, group, user = accounts(_read_accounts(root, "passwd"), _read_accounts(root, "group"),
                                   ids.uid, ids.gid)  # fmt: skip
    listen = write_ssh_files(task_dir, launch, ssh, user, (ids.host_uid, ids.host_gid))
    for name, text in ((PASSWD, passwd), (GROUP, group)):
        _write(task_dir / name, text, 0, 0, 0o644)
    config["mounts"] += [
        bind(str(kit), CONTAINER_DIR, readonly=True),
        bind(str(task_dir / JOB_HOSTS_DIR / KEYS), f"{WORKDIR}/.ssh", readonly=True),
        file_bind(str(task_dir / PASSWD), "/etc/passwd"),
        file_bind(str(task_dir / GROUP), "/etc/group"),
    ]
    hosts = ",".join(hostname_of(p.role, p.index) for p, _ in _servers(launch, ssh))
    process = config["process"]
    process["args"] = ["/bin/sh", f"{CONTAINER_DIR}/init", listen, "1" if ssh.required else "0",
                       str(ssh.barrier_s), hosts, "--", *process["args"]]  # fmt: skip
