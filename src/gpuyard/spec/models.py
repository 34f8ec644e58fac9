"""The job spec as values: `JobSpec` and `TaskRoleSpec`, immutable, snake_case attributes.

Build them from untrusted input with `parse_job_spec` / `load_job_spec`, which validate;
the constructors themselves do not. `JobSpec.to_document()` gives the normalised document
in our camelCase format, the form the store persists and the API shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuyard.model import PriorityClass
from gpuyard.spec import limits

SECRET_KEY = "secret"  # `{secret: VALUE}`: a value marked secret in a document


@dataclass(frozen=True, slots=True)
class Secret:
    """A value the spec marks secret (`HF_TOKEN: {secret: hf_...}`; OpenPAI `secrets`): the
    store keeps it encrypted and the API shows it only to the job's owner and admins. Its
    repr hides it, so a spec printed to a log does not carry it."""

    value: str = field(repr=False)

    def to_document(self) -> dict[str, str]:
        return {SECRET_KEY: self.value}


def reveal(value: str | Secret) -> str:
    """The text of a plain or secret value (what the task gets)."""
    return value.value if isinstance(value, Secret) else value


def _document(value: str | Secret) -> str | dict[str, str]:
    return value.to_document() if isinstance(value, Secret) else value


@dataclass(frozen=True, slots=True)
class After:
    """The jobs a job waits for (`after`): `ok` to succeed, `any` to end, `notok` to fail or
    stop (Slurm's afterok, afterany, afternotok). An id may name a job array: its state."""

    ok: tuple[str, ...] = ()
    any: tuple[str, ...] = ()
    notok: tuple[str, ...] = ()

    @property
    def job_ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((*self.ok, *self.any, *self.notok)))

    def to_document(self) -> dict[str, list[str]]:
        kinds = {"ok": self.ok, "any": self.any, "notok": self.notok}
        return {kind: list(ids) for kind, ids in kinds.items() if ids}


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskRoleSpec:
    """One task role: `task_number` identical tasks, each asking for these resources.

    GPUs: `gpu_number` whole GPUs (an int), or a share of one GPU in shared mode — a fraction
    of its memory (`gpu_number` a float in (0, 1)) or `gpu_memory_mb` — with an optional MPS
    compute share `gpu_compute_percent` (docs/gpu-sharing.md).
    """

    command: str | Secret  # a Secret when an OpenPAI secret is substituted in it
    task_number: int = limits.DEFAULT_TASK_NUMBER
    cpu_number: float = limits.DEFAULT_CPU_NUMBER
    memory_mb: int = limits.DEFAULT_MEMORY_MB
    gpu_number: int | float = limits.DEFAULT_GPU_NUMBER
    gpu_type: str | None = None
    gpu_memory_mb: int | None = None
    gpu_compute_percent: int | None = None
    ports: tuple[tuple[str, int], ...] = ()  # (label, count) per task, sorted by label
    min_failed: int = 1  # failed tasks of the role that fail the job; -1: none does
    min_succeeded: int = -1  # succeeded tasks of the role that succeed the job; -1: all end
    image: str | None = None  # the role's own image (None: the job's `image`)

    @property
    def gpu_fraction(self) -> float | None:
        """The fraction of one shared GPU asked by `gpuNumber: 0.5`; None otherwise."""
        return self.gpu_number if isinstance(self.gpu_number, float) else None

    @property
    def shares_gpu(self) -> bool:
        return self.gpu_memory_mb is not None or self.gpu_fraction is not None

    @property
    def whole_gpus(self) -> int:
        return 0 if self.shares_gpu else int(self.gpu_number)

    def _distributed_document(self) -> dict[str, Any]:
        """ports and the completion policy, where they differ from the defaults."""
        out: dict[str, Any] = {}
        if self.ports:
            out["ports"] = dict(self.ports)
        if self.min_failed != 1:
            out["minFailedTasks"] = self.min_failed
        if self.min_succeeded != -1:
            out["minSucceededTasks"] = self.min_succeeded
        if self.image is not None:
            out["image"] = self.image
        return out

    def to_document(self) -> dict[str, Any]:
        cpu = self.cpu_number
        share = {"gpuMemoryMB": self.gpu_memory_mb, "gpuComputePercent": self.gpu_compute_percent}
        return {
            "taskNumber": self.task_number,
            "cpuNumber": int(cpu) if float(cpu).is_integer() else cpu,
            "memoryMB": self.memory_mb,
            "gpuNumber": self.gpu_number,
            "gpuType": self.gpu_type,
            **{key: value for key, value in share.items() if value is not None},
            **self._distributed_document(),
            "command": _document(self.command),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class SshSpec:
    """sshd in the job's tasks (OpenPAI's `ssh` runtime plugin; docs/openpai.md, *ssh*):
    `job_keys` puts the job's own key pair in every task, so its tasks reach each other by
    host name (`ssh worker-1`); `authorized_keys` are the user's public keys (one a line, no
    options). `roles`: the roles that run sshd (empty: all). `barrier`: each task waits until
    it reaches every task that runs sshd, at most `barrier_timeout_s`. `required`: a sshd that
    does not start fails the task (OpenPAI's `failurePolicy: fail`)."""

    job_keys: bool = True
    authorized_keys: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    barrier: bool = False
    barrier_timeout_s: int = 1800
    required: bool = True

    def applies(self, role: str) -> bool:
        return not self.roles or role in self.roles

    def to_document(self) -> dict[str, Any]:
        return {
            "jobKeys": self.job_keys,
            "authorizedKeys": list(self.authorized_keys),
            "taskRoles": list(self.roles),
            "barrier": self.barrier,
            "barrierTimeout": self.barrier_timeout_s,
            "failurePolicy": "fail" if self.required else "ignore",
        }


@dataclass(frozen=True, slots=True)
class ServiceSpec:
    """A web endpoint of the job (`services: {notebook: 8888}`) that the platform proxies at
    `/jobs/ID/services/NAME/` for whoever may open it (docs/services.md). `task` is the task
    that serves it, `role/index`; None: the first role's task 0. `strip_prefix`: the app is
    asked for the path below the prefix (false: the whole path, for apps given a base URL)."""

    name: str
    port: int
    task: str | None = None
    strip_prefix: bool = True

    def to_document(self) -> int | dict[str, Any]:
        if self.task is None and self.strip_prefix:
            return self.port
        out: dict[str, Any] = {"port": self.port, "stripPrefix": self.strip_prefix}
        return out | ({"task": self.task} if self.task else {})


@dataclass(frozen=True, slots=True, kw_only=True)
class JobSpec:
    """A validated job. `task_roles` keeps the spec's order: tasks are numbered in it."""

    name: str
    task_roles: dict[str, TaskRoleSpec]
    image: str | None = None
    data_dir: str | None = None
    output_dir: str | None = None
    env: dict[str, str | Secret] = field(default_factory=dict)
    retry_count: int = 0
    priority: int = 0
    tenant: str = limits.DEFAULT_TENANT
    max_runtime_s: int | None = None
    webhook: str | None = None  # POSTed to when the job ends (docs/observability.md)
    # the node's network namespace instead of the task's own: a tenant permission (Tenant.
    # allow_host_network), for e.g. NCCL over InfiniBand (docs/runtime.md, Network)
    host_network: bool = False
    after: After | None = None  # the jobs it waits for (spec/arrays.py, docs/spec.md)
    # prod | normal | opportunistic (docs/scheduler.md, Priority classes)
    priority_class: PriorityClass = PriorityClass.NORMAL
    ssh: SshSpec | None = None  # sshd in its tasks (OpenPAI's ssh plugin)
    services: tuple[ServiceSpec, ...] = ()  # web endpoints proxied by the platform
    # a session's job (`gpuyard run`, docs/interactive.md): its tasks are held open, the
    # command runs in the session attached to it, and the job ends with that session
    interactive: bool = False
    # the tenant's named storage its tasks mount (OpenPAI's teamwise_storage; spec/storage.py)
    storage: tuple[str, ...] = ()
    # all tasks start together (default); False: as they fit (OpenPAI's gangAllocation: false,
    # docs/scheduler.md, Jobs without gang allocation)
    gang: bool = True

    def __post_init__(self) -> None:
        # own copies, so that the caller's dicts cannot change this value later
        object.__setattr__(self, "task_roles", dict(self.task_roles))
        object.__setattr__(self, "env", dict(self.env))

    def __hash__(self) -> int:
        return hash((self.name, self.tenant, tuple(self.task_roles.items())))

    def image_of(self, role: str) -> str | None:
        """The image `role`'s tasks run: its own, else the job's (None: the host's root fs)."""
        return self.task_roles[role].image or self.image

    def service(self, name: str) -> ServiceSpec | None:
        return next((s for s in self.services if s.name == name), None)

    def service_task(self, service: ServiceSpec) -> str:
        """The task that serves `service`: its own, else the first role's task 0."""
        return service.task or f"{next(iter(self.task_roles))}/0"

    @property
    def task_count(self) -> int:
        """Tasks in all roles together."""
        return sum(r.task_number for r in self.task_roles.values())

    @property
    def total_gpus(self) -> int:
        """Whole GPUs asked by all tasks together (shared-GPU tasks count 0)."""
        return sum(r.task_number * r.whole_gpus for r in self.task_roles.values())

    def to_document(self) -> dict[str, Any]:
        """Our format, every field present (`after`, `priorityClass`, `ssh`, `services`,
        `interactive`, `storage` and `gang` only when given);
        `parse_job_spec(doc) == self`."""
        after: dict[str, Any] = {"after": self.after.to_document()} if self.after else {}
        if self.priority_class is not PriorityClass.NORMAL:
            after["priorityClass"] = self.priority_class.value
        return {
            "name": self.name,
            "image": self.image,
            "dataDir": self.data_dir,
            "outputDir": self.output_dir,
            "env": {name: _document(value) for name, value in self.env.items()},
            "retryCount": self.retry_count,
            "priority": self.priority,
            "tenant": self.tenant,
            "maxRuntime": self.max_runtime_s,
            "webhook": self.webhook,
            "hostNetwork": self.host_network,
            "taskRoles": {name: r.to_document() for name, r in self.task_roles.items()},
            **after,
            **({"ssh": self.ssh.to_document()} if self.ssh else {}),
            **({"services": {s.name: s.to_document() for s in self.services}}
               if self.services else {}),
            **({"interactive": True} if self.interactive else {}),
            **({"storage": list(self.storage)} if self.storage else {}),
            **({"gang": False} if not self.gang else {}),
        }
