"""The database tables: jobs, tasks (one row per task per attempt), events, nodes; tenants,
users, their memberships in tenants and their API tokens (hashed)."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class JobRow(Base):
    __tablename__ = "jobs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, unique=True)  # submission order
    name: Mapped[str] = mapped_column(String(64))
    tenant: Mapped[str] = mapped_column(String(64), index=True)
    owner: Mapped[str | None] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(16), index=True)
    priority: Mapped[int] = mapped_column(Integer, default=0)
    attempt: Mapped[int] = mapped_column(Integer, default=1)
    retry_count: Mapped[int] = mapped_column(Integer, default=0)
    retries_used: Mapped[int] = mapped_column(Integer, default=0)
    spec: Mapped[str] = mapped_column(Text)  # the normalised spec document, JSON
    submitted_at: Mapped[float] = mapped_column(Float)
    started_at: Mapped[float | None] = mapped_column(Float)
    finished_at: Mapped[float | None] = mapped_column(Float)
    reason: Mapped[str | None] = mapped_column(String(64))
    message: Mapped[str | None] = mapped_column(Text)
    pending_code: Mapped[str | None] = mapped_column(String(64))
    pending_reason: Mapped[str | None] = mapped_column(Text)
    pending_position: Mapped[int | None] = mapped_column(Integer)  # 1-based, in its tenant
    pending_queue_length: Mapped[int | None] = mapped_column(Integer)
    pending_eta: Mapped[float | None] = mapped_column(Float)  # estimated start, epoch seconds
    stop_requested: Mapped[str | None] = mapped_column(String(32))  # Cancelled | Timeout
    queued_at: Mapped[float | None] = mapped_column(Float)  # when this attempt was queued
    borrowed: Mapped[str] = mapped_column(Text, default="[]")  # JSON [[flavor, amount]]
    platform_failures: Mapped[int] = mapped_column(Integer, default=0)  # in a row
    not_before: Mapped[float | None] = mapped_column(Float)  # backoff: not placed before
    preemptions: Mapped[int] = mapped_column(Integer, default=0)  # times requeued as Preempted
    pending_eta_basis: Mapped[str | None] = mapped_column(Text)  # what the estimate rests on
    # the document as submitted (OpenPAI v2), JSON, secrets sealed; None: the spec is it
    original_spec: Mapped[str | None] = mapped_column(Text)
    # who holds the queued job (`gpuyard hold`): it is not scheduled until released
    held_by: Mapped[str | None] = mapped_column(String(64))
    # a child of a job array (store/arrays.py): its parent's id and its index
    array_id: Mapped[str | None] = mapped_column(String(32), index=True)
    array_index: Mapped[int | None] = mapped_column(Integer)
    # when a session (exec, port-forward, `gpuyard run`'s) was last seen open on the job: an
    # interactive job with none for its tenant's timeout is stopped (docs/interactive.md)
    session_seen_at: Mapped[float | None] = mapped_column(Float)
    # the revision of the transaction that last changed it as the controller acts on it
    # (store/revisions.py): the controller reads only rows above the one it last saw
    rev: Mapped[int] = mapped_column(BigInteger, index=True, default=0, server_default="0")


class RevisionRow(Base):
    """A counter taken under its row's lock (store/revisions.py): `jobs`, the jobs' revision."""

    __tablename__ = "revisions"

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    n: Mapped[int] = mapped_column(BigInteger)


class JobArrayRow(Base):
    """A job array's parent: not a job (its children are), its state their summary."""

    __tablename__ = "job_arrays"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(64))
    tenant: Mapped[str] = mapped_column(String(64), index=True)
    owner: Mapped[str | None] = mapped_column(String(64))
    expression: Mapped[str] = mapped_column(Text)  # as submitted: 0-49%8
    size: Mapped[int] = mapped_column(Integer)  # how many children
    max_running: Mapped[int | None] = mapped_column(Integer)  # %N; None: no limit
    submitted_at: Mapped[float] = mapped_column(Float)
    stop_requested: Mapped[str | None] = mapped_column(String(32))  # Cancelled


class TaskRow(Base):
    __tablename__ = "tasks"
    __table_args__ = (
        UniqueConstraint("job_id", "attempt", "role", "idx", name="uq_task_attempt"),
        Index("ix_tasks_state", "state"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    attempt: Mapped[int] = mapped_column(Integer)
    role: Mapped[str] = mapped_column(String(32))
    idx: Mapped[int] = mapped_column(Integer)
    key: Mapped[str] = mapped_column(String(128), unique=True)  # container / state dir name
    state: Mapped[str] = mapped_column(String(16))
    node: Mapped[str] = mapped_column(String(128))
    gpus: Mapped[str] = mapped_column(Text, default="[]")  # JSON list of GPU indices
    gpu_memory_mb: Mapped[int] = mapped_column(Integer, default=0)  # > 0: shared, on gpus[0]
    cpu_milli: Mapped[int] = mapped_column(Integer)
    memory_mb: Mapped[int] = mapped_column(Integer)
    exit_code: Mapped[int | None] = mapped_column(Integer)
    reason: Mapped[str | None] = mapped_column(String(64))
    message: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[float | None] = mapped_column(Float)
    finished_at: Mapped[float | None] = mapped_column(Float)
    stop_sent: Mapped[bool] = mapped_column(Boolean, default=False)
    # the usage roll-up (store/rollup.py): accounted up to; done once its end is accounted
    usage_to: Mapped[float | None] = mapped_column(Float)
    usage_done: Mapped[bool] = mapped_column(Boolean, default=False, index=True)


class EventRow(Base):
    __tablename__ = "events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    time: Mapped[float] = mapped_column(Float)
    attempt: Mapped[int] = mapped_column(Integer)
    task: Mapped[str | None] = mapped_column(String(64))  # "role/index" or None for the job
    from_state: Mapped[str | None] = mapped_column(String(16))
    to_state: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(String(64))
    message: Mapped[str | None] = mapped_column(Text)


class NodeRow(Base):
    __tablename__ = "nodes"

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    cpu_milli: Mapped[int] = mapped_column(Integer)
    memory_mb: Mapped[int] = mapped_column(Integer)
    gpus: Mapped[str] = mapped_column(Text, default="[]")  # JSON list of GPU devices
    schedulable: Mapped[bool] = mapped_column(Boolean, default=True)
    engine: Mapped[str] = mapped_column(String(32), default="local")
    last_seen: Mapped[float] = mapped_column(Float)
    address: Mapped[str | None] = mapped_column(String(64))  # where other nodes reach it
    # set by an admin: None | cordoned | draining (draining: preempted after drain_deadline)
    cordon: Mapped[str | None] = mapped_column(String(16))
    cordon_reason: Mapped[str | None] = mapped_column(Text)
    cordon_by: Mapped[str | None] = mapped_column(String(64))
    cordon_at: Mapped[float | None] = mapped_column(Float)
    drain_deadline: Mapped[float | None] = mapped_column(Float)


class TaskPortRow(Base):
    """A port reserved for a task on its node; freed once the task has ended."""

    __tablename__ = "task_ports"

    node: Mapped[str] = mapped_column(String(128), primary_key=True)
    port: Mapped[int] = mapped_column(Integer, primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"), index=True)
    label: Mapped[str] = mapped_column(String(32))


class TenantRow(Base):
    __tablename__ = "tenants"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    settings: Mapped[str] = mapped_column(Text)  # the Tenant's fields (but its name), JSON
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)


class UserRow(Base):
    __tablename__ = "users"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    role: Mapped[str] = mapped_column(String(16))  # admin | user (platform role)
    created_at: Mapped[float] = mapped_column(Float)


class MembershipRow(Base):
    __tablename__ = "memberships"

    user: Mapped[str] = mapped_column(
        ForeignKey("users.name", ondelete="CASCADE"), primary_key=True
    )
    tenant: Mapped[str] = mapped_column(
        ForeignKey("tenants.name", ondelete="CASCADE"), primary_key=True, index=True
    )
    role: Mapped[str] = mapped_column(String(16))  # tenant-admin | member | viewer


class TokenRow(Base):
    __tablename__ = "tokens"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)  # public id, never secret
    user: Mapped[str] = mapped_column(ForeignKey("users.name", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)  # sha256 hex of the token
    name: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[float] = mapped_column(Float)
    last_used_at: Mapped[float | None] = mapped_column(Float)
    expires_at: Mapped[float | None] = mapped_column(Float)
    revoked_at: Mapped[float | None] = mapped_column(Float)


class UsageHourRow(Base):
    """What one job used in one UTC hour (docs/accounting.md): never compacted, so usage
    outlives the task rows it was rolled up from. No foreign key: it outlives the job too."""

    __tablename__ = "usage_hours"
    __table_args__ = (Index("ix_usage_hours_tenant_hour", "tenant", "hour"),)

    hour: Mapped[float] = mapped_column(Float, primary_key=True)  # epoch s, the hour's start
    job_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(64))
    owner: Mapped[str | None] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(64))
    gpu_seconds: Mapped[float] = mapped_column(Float, default=0.0)  # shared GPUs by share
    cpu_seconds: Mapped[float] = mapped_column(Float, default=0.0)  # cores x seconds
    lost_gpu_seconds: Mapped[float] = mapped_column(Float, default=0.0)  # preempted attempts


class UsageJobRow(Base):
    """A job's wait to its first start, written once it started (never compacted)."""

    __tablename__ = "usage_jobs"

    job_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(64))
    owner: Mapped[str | None] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(64))
    submitted_at: Mapped[float] = mapped_column(Float)
    first_start: Mapped[float] = mapped_column(Float, index=True)
    wait_s: Mapped[float] = mapped_column(Float)


class UsageQueueRow(Base):
    """Queued job-seconds of a tenant in one UTC hour: its queue's length integrated over
    time, sampled at each roll-up (never compacted); / 3600 is the hour's average length."""

    __tablename__ = "usage_queue"

    hour: Mapped[float] = mapped_column(Float, primary_key=True)
    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    queued_job_seconds: Mapped[float] = mapped_column(Float, default=0.0)


class UserNotifyRow(Base):
    """A user's e-mail address and when to mail them about their jobs (failure | end | off)."""

    __tablename__ = "user_notify"

    user: Mapped[str] = mapped_column(
        ForeignKey("users.name", ondelete="CASCADE"), primary_key=True
    )
    email: Mapped[str | None] = mapped_column(String(254))
    notify: Mapped[str] = mapped_column(String(16), default="off")


class MailSettingsRow(Base):
    """The SMTP relay (one row, id 1); its password sealed with the store's secrets key."""

    __tablename__ = "mail_settings"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    host: Mapped[str | None] = mapped_column(String(253))
    port: Mapped[int] = mapped_column(Integer, default=587)
    sender: Mapped[str | None] = mapped_column(String(254))
    starttls: Mapped[bool] = mapped_column(Boolean, default=True)
    username: Mapped[str | None] = mapped_column(String(254))
    password_sealed: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[float] = mapped_column(Float)
    updated_by: Mapped[str | None] = mapped_column(String(64))


class RegistryCredentialRow(Base):
    """A tenant's login to a container registry (store/registries.py): set by a platform
    admin, its password sealed with the store's secrets key, read only to launch tasks."""

    __tablename__ = "registry_credentials"

    tenant: Mapped[str] = mapped_column(
        ForeignKey("tenants.name", ondelete="CASCADE"), primary_key=True
    )
    # host[:port]; not `registry`, which SQLAlchemy keeps for the declarative class
    registry_host: Mapped[str] = mapped_column("registry", String(253), primary_key=True)
    username: Mapped[str] = mapped_column(String(254))
    password_sealed: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[float] = mapped_column(Float)
    updated_by: Mapped[str | None] = mapped_column(String(64))


class TenantStorageRow(Base):
    """A tenant's named storage (store/storage.py, model/storage.py): what a job's `storage`
    (OpenPAI's teamwise_storage) mounts by name. Set by a platform admin."""

    __tablename__ = "tenant_storage"

    tenant: Mapped[str] = mapped_column(
        ForeignKey("tenants.name", ondelete="CASCADE"), primary_key=True
    )
    name: Mapped[str] = mapped_column(String(63), primary_key=True)
    path: Mapped[str] = mapped_column(String(4096))
    mount_point: Mapped[str] = mapped_column(String(1024))
    read_only: Mapped[bool] = mapped_column(Boolean, default=True)
    updated_at: Mapped[float] = mapped_column(Float)
    updated_by: Mapped[str | None] = mapped_column(String(64))
