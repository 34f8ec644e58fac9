"""Persistence: jobs, tasks, events, nodes, tenants, users and tokens in SQLite (embedded) or
PostgreSQL (by URL)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine

from gpuyard.model import Clock, SystemClock
from gpuyard.store.accounting import AccountingRepo, JobWait, UsageHour
from gpuyard.store.arrays import ArrayChild, ArrayRecord, ArrayRepo, NewArray, Stored
from gpuyard.store.db import (
    make_engine,
    migrate,
    private_sqlite,
    session_factory,
    sqlite_url,
)
from gpuyard.store.jobfilter import JobFilter
from gpuyard.store.jobs import (
    JobAlreadyEnded,
    JobNotFound,
    JobNotQueued,
    JobRepo,
    NewJob,
    NewTask,
    task_key,
)
from gpuyard.store.nodes import (
    NodeNotFound,
    NodeRecord,
    NodeRepo,
    PortRequest,
    PortsExhausted,
    TaskPorts,
)
from gpuyard.store.notify import MailSettings, NotifyPrefs, NotifyRepo, NotifyWhen
from gpuyard.store.records import EventRecord, JobRecord, Pending, TaskRecord, pending_differs
from gpuyard.store.registries import RegistryEntry, RegistryRepo
from gpuyard.store.secrets import SecretBox
from gpuyard.store.storage import StorageEntry, StorageRepo
from gpuyard.store.tenants import (
    TenantExists,
    TenantNotFound,
    TenantRecord,
    TenantRepo,
    tenant_doc,
    tenant_of,
)
from gpuyard.store.tokens import NewToken, TokenNotFound, TokenRecord, TokenRepo
from gpuyard.store.usage import JobRunTime, UsageRepo
from gpuyard.store.users import (
    Membership,
    PlatformRole,
    TenantRole,
    UserExists,
    UserNotFound,
    UserRecord,
    UserRepo,
)


@dataclass
class Store:
    engine: Engine
    jobs: JobRepo
    nodes: NodeRepo
    tenants: TenantRepo
    users: UserRepo
    tokens: TokenRepo
    usage: UsageRepo
    secrets: SecretBox  # seals the secret values of job specs (<data dir>/secrets.key)
    accounting: AccountingRepo  # the usage roll-up (store/rollup.py, docs/accounting.md)
    notify: NotifyRepo  # e-mail notifications: users' addresses, the SMTP relay
    arrays: ArrayRepo  # batch submissions, job arrays, what dependencies read (arrays.py)
    registries: RegistryRepo  # tenants' registry credentials, passwords sealed
    storage: StorageRepo  # tenants' named storage (OpenPAI's teamwise_storage)

    def close(self) -> None:
        self.engine.dispose()


def open_store(
    data_dir: Path | None = None, url: str | None = None, clock: Clock | None = None
) -> Store:
    """Open (and migrate) the store: `url` if given (SQLite or PostgreSQL), else SQLite under
    `data_dir`; `data_dir` also keeps the key that seals secrets (made if missing)."""
    if data_dir is not None:
        data_dir.mkdir(parents=True, exist_ok=True)
    if url is None:
        if data_dir is None:
            raise ValueError("open_store needs a data_dir or a url")
        private_sqlite(data_dir)
        url = sqlite_url(data_dir)
    engine = make_engine(url)
    migrate(engine)
    sessions = session_factory(engine)
    clk = clock or SystemClock()
    secrets = SecretBox.at(data_dir)
    return Store(
        engine,
        JobRepo(sessions, clk, secrets),
        NodeRepo(sessions, clk),
        TenantRepo(sessions, clk),
        UserRepo(sessions, clk),
        TokenRepo(sessions, clk),
        UsageRepo(sessions),
        secrets,
        AccountingRepo(sessions),
        NotifyRepo(sessions, clk, secrets),
        ArrayRepo(sessions, clk, secrets),
        registries=RegistryRepo(sessions, clk, secrets),
        storage=StorageRepo(sessions, clk),
    )


__all__ = [
    "RegistryEntry",
    "RegistryRepo",
    "StorageEntry",
    "StorageRepo",
    "ArrayChild",
    "ArrayRecord",
    "ArrayRepo",
    "NewArray",
    "Stored",
    "AccountingRepo",
    "MailSettings",
    "NotifyPrefs",
    "NotifyRepo",
    "NotifyWhen",
    "JobWait",
    "UsageHour",
    "EventRecord",
    "Membership",
    "NewToken",
    "PlatformRole",
    "TenantExists",
    "TenantNotFound",
    "TenantRecord",
    "TenantRepo",
    "TenantRole",
    "TokenNotFound",
    "TokenRecord",
    "TokenRepo",
    "UsageRepo",
    "JobRunTime",
    "UserExists",
    "UserNotFound",
    "UserRecord",
    "UserRepo",
    "tenant_doc",
    "tenant_of",
    "JobAlreadyEnded",
    "JobFilter",
    "JobNotQueued",
    "JobNotFound",
    "JobRecord",
    "JobRepo",
    "NewJob",
    "Pending",
    "NewTask",
    "NodeNotFound",
    "NodeRecord",
    "NodeRepo",
    "PortRequest",
    "PortsExhausted",
    "TaskPorts",
    "SecretBox",
    "Store",
    "TaskRecord",
    "open_store",
    "pending_differs",
    "task_key",
]
