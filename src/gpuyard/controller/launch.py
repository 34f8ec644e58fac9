"""Turn a bound task (job spec + placement) into the `TaskLaunch` its node runs.

A job's tasks see each other (`job_peers`): every task's address and the ports reserved for it
on its node (`reserve_ports`: the role's `ports`, and a `master` port for rank 0, the job's first
task of its first role). Ranks follow the spec: roles in order, then index. A task's address is
that of its own network namespace, which its node holds for it from before the start
(`claim_addresses`); a `hostNetwork` job's tasks have their node's address.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpuyard.controller.interactive import HOLD_COMMAND
from gpuyard.engine import Engine
from gpuyard.model import Node, Tenant
from gpuyard.model.registries import RegistryLogin, image_registry
from gpuyard.model.storage import StorageMount
from gpuyard.runtime.env import MASTER_PORT_LABEL
from gpuyard.runtime.logcap import DEFAULT_LIMIT_MB
from gpuyard.runtime.sshd import SSH_PORT_LABEL
from gpuyard.runtime.types import TaskLaunch, TaskPeer
from gpuyard.spec import JobSpec, reveal
from gpuyard.spec.paienv import job_env
from gpuyard.spec.registryauth import job_logins
from gpuyard.store import JobRecord, PortRequest, Store, TaskPorts, TaskRecord

NOBODY = (65534, 65534)  # a tenant without an id block yet (never after the server starts)
DEFAULT_PORT_RANGE = (20000, 29999)  # outside Linux's ephemeral range (32768-60999)


def run_as(tenant: Tenant | None) -> tuple[int, int]:
    """Tasks run as their tenant's own uid and gid (no two tenants share one), as root inside
    the container where the tenant allows it (or where no tenants are configured)."""
    if tenant is None or tenant.allow_root:
        return (0, 0)
    return (tenant.uid, tenant.uid) if tenant.uid is not None else NOBODY


def userns_base(tenant: Tenant | None) -> int | None:
    """The id block a task's user namespace maps onto (runtime/userns.py: root in the
    container, the tenant's uid on the host); None where the tenant's tasks are host root
    (`allowRoot`, or no tenants) or it has no block yet."""
    if tenant is None or tenant.allow_root:
        return None
    return tenant.uid


def host_network_refused(spec: JobSpec, tenant: Tenant | None) -> str | None:
    """Why the job may not have `hostNetwork: true` (None: it does not ask, or may)."""
    if not spec.host_network or tenant is None or tenant.allow_host_network:
        return None
    return (
        f"tenant {tenant.name} may not run jobs in the node's network (its tasks would reach "
        "every service of the node and of the cluster); a platform admin grants it: "
        f"gpuyard admin tenant update {tenant.name} --allow-host-network"
    )


def launch_storage(store: Store, job: JobRecord, spec: JobSpec) -> dict[str, StorageMount]:
    """The job's tenant's named storage by name (none read when the job names none): a job's
    names resolve in its own tenant only, as they are now."""
    return store.storage.mounts(job.tenant) if spec.storage else {}


def storage_refused(spec: JobSpec, mounts: Mapping[str, StorageMount]) -> str | None:
    """Why the job's tasks cannot start: a storage it names is gone (None: all are there)."""
    missing = [name for name in spec.storage if name not in mounts]
    if not missing:
        return None
    return (
        f"storage {', '.join(missing)}: tenant {spec.tenant} has no such storage any more "
        "(removed since the job was submitted)"
    )


def claim_addresses(engine: Engine, tasks: Sequence[TaskRecord]) -> dict[str, str]:
    """Task key → the address its node holds for it (one call per node); raises what the
    engine raises."""
    by_node: dict[str, list[str]] = {}
    for t in tasks:
        by_node.setdefault(t.node, []).append(t.key)
    out: dict[str, str] = {}
    for node, keys in sorted(by_node.items()):
        out.update(engine.claim_addresses(node, keys))
    return out


def rank_order(spec: JobSpec, tasks: Sequence[TaskRecord]) -> list[TaskRecord]:
    """The tasks by global rank: roles in the spec's order, then index."""
    order = {name: i for i, name in enumerate(spec.task_roles)}
    return sorted(tasks, key=lambda t: (order.get(t.role, len(order)), t.index))


def port_requests(spec: JobSpec, tasks: Sequence[TaskRecord]) -> list[PortRequest]:
    """What each task needs: its role's ports; rank 0 also a `master` port (MASTER_PORT); a
    task that runs sshd an `ssh` port."""
    ranked = rank_order(spec, tasks)
    out = []
    for rank, t in enumerate(ranked):
        labels = list(spec.task_roles[t.role].ports)
        if rank == 0 and MASTER_PORT_LABEL not in dict(labels):
            labels.append((MASTER_PORT_LABEL, 1))
        if spec.ssh and spec.ssh.applies(t.role) and SSH_PORT_LABEL not in dict(labels):
            labels.append((SSH_PORT_LABEL, 1))  # where its sshd listens (runtime/sshd.py)
        out.append(PortRequest(t.id, t.node, tuple(labels)))
    return out


def reserve_ports(
    store: Store, spec: JobSpec, tasks: Sequence[TaskRecord], port_range: tuple[int, int]
) -> dict[int, TaskPorts]:
    """Task id → its reserved ports (persisted; PortsExhausted if a node has no room)."""
    return store.nodes.reserve_ports(port_requests(spec, tasks), port_range)


def job_peers(
    spec: JobSpec,
    tasks: Sequence[TaskRecord],
    nodes: Mapping[str, Node],
    ports: Mapping[int, TaskPorts],
    addresses: Mapping[str, str] | None = None,
) -> tuple[TaskPeer, ...]:
    """Every task of the attempt as its siblings see it, in rank order: at the address of its
    own namespace (`addresses`, by task key), else its node's."""
    own = addresses or {}
    return tuple(
        TaskPeer(
            t.role,
            t.index,
            t.node,
            own.get(t.key) or (nodes[t.node].address if t.node in nodes else "127.0.0.1"),
            ports.get(t.id, ()),
        )
        for t in rank_order(spec, tasks)
    )


def array_env(job: JobRecord) -> dict[str, str]:
    """A job array's child knows its index and its parent (GPUYARD_ARRAY_INDEX, _PARENT)."""
    if job.array_id is None:
        return {}
    return {"GPUYARD_ARRAY_INDEX": str(job.array_index), "GPUYARD_ARRAY_PARENT": job.array_id}


def launch_logins(store: Store, job: JobRecord) -> tuple[RegistryLogin, ...]:
    """The registry logins a job's tasks may pull with: the job's own (OpenPAI `auth`, from
    its stored original document) before its tenant's (`gpuyard admin registry set`)."""
    return job_logins(job.original) + store.registries.logins(job.tenant)


def image_login(logins: Sequence[RegistryLogin], image: str | None) -> RegistryLogin | None:
    """The first of `logins` for `image`'s registry (None: the image is pulled without)."""
    if image is None:
        return None
    registry = image_registry(image)
    return next((login for login in logins if login.registry == registry), None)


def build_launch(
    job: JobRecord,
    spec: JobSpec,
    task: TaskRecord,
    node: Node,
    pids_limit: int,
    tenant: Tenant | None = None,
    peers: tuple[TaskPeer, ...] = (),
    logins: Sequence[RegistryLogin] = (),
    storage: Mapping[str, StorageMount] | None = None,
) -> TaskLaunch:
    role = spec.task_roles[task.role]
    by_index = {g.index: g for g in node.gpus}
    return TaskLaunch(
        key=task.key,
        job_id=job.id,
        job_name=spec.name,
        role=task.role,
        index=task.index,
        attempt=task.attempt,
        # an interactive job's command runs in its session: its task holds the container open
        command=HOLD_COMMAND if spec.interactive else reveal(role.command),  # secrets: here only
        cpu=task.cpu_milli / 1000,
        memory_mb=task.memory_mb,
        gpus=tuple(by_index[i] for i in task.gpus),
        env=tuple(sorted((name, reveal(value)) for name, value in spec.env.items())),
        data_dir=spec.data_dir,
        output_dir=spec.output_dir,
        image=spec.image_of(task.role),
        pids_limit=pids_limit,
        resumed=task.attempt > 1,
        run_as=run_as(tenant),
        userns_base=userns_base(tenant),
        role_task_counts=tuple((name, r.task_number) for name, r in spec.task_roles.items()),
        job_env=tuple(sorted((job_env(spec, job.owner) | array_env(job)).items())),
        gpu_memory_mb=task.gpu_memory_mb,
        gpu_compute_percent=role.gpu_compute_percent if task.gpu_memory_mb else None,
        peers=peers,
        storage_roots=tenant.storage_roots if tenant is not None else (),
        seccomp=str(tenant.seccomp) if tenant is not None else "default",
        network="host" if spec.host_network else "isolated",
        allow_internet=tenant is not None and tenant.allow_internet,
        log_limit_mb=tenant.log_limit_mb if tenant is not None else DEFAULT_LIMIT_MB,
        workspace_mb=tenant.workspace_mb if tenant is not None else None,
        image_login=image_login(logins, spec.image_of(task.role)),
        storage=tuple((storage or {})[n] for n in spec.storage if n in (storage or {})),
    )
