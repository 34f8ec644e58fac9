"""`gpuyard up` as one of several servers (docs/ha.md): its lease, and what it does once
elected.

SQLite: the data dir's lock first (`lease.lock_data_dir`: a second server is refused with the
holder's pid), then a `SoloLease`: this server leads at once. PostgreSQL: a `PgLease`; the
server that wins leads, the others follow (they serve the API from the database; their
submissions and cancels wake the leader by NOTIFY) and take over when it is gone.

`Takeover` is what an elected server does, at its start or later: build the real engine (the
local engine's node, or the Ray cluster's agents: it adopts the running tasks), bootstrap an
empty store, and start the controller once the API serves.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

from gpuyard.api.services.bootstrap import assign_ids, bootstrap
from gpuyard.controller import Controller
from gpuyard.controller.leader import Leadership
from gpuyard.controller.lease import Fence, Lease, PgLease, SoloLease, lock_data_dir
from gpuyard.controller.standby import HandoverEngine
from gpuyard.engine import Engine
from gpuyard.store import Store

log = logging.getLogger("gpuyard.leader")


def is_sqlite(db_url: str | None) -> bool:
    return db_url is None or db_url.startswith("sqlite")


def lock_if_sqlite(data_dir: Path, db_url: str | None) -> int | None:
    """SQLite: hold the data dir (before its database is opened); None on PostgreSQL."""
    if not is_sqlite(db_url):
        return None
    data_dir.mkdir(parents=True, exist_ok=True)
    return lock_data_dir(data_dir)


def server_id(port: int) -> str:
    return f"{socket.gethostname()}:{port}:{os.getpid()}"


def server_address(host: str, port: int) -> str:
    """The URL other servers and admins are told this server's API is at."""
    if host in ("0.0.0.0", "::", ""):
        host = socket.getfqdn()
    return f"http://{host}:{port}"


def build_leadership(
    controller: Controller,
    db_url: str | None,
    lock_fd: int | None,
    address: str,
    holder: str,
    ttl_s: float,
) -> Leadership:
    """The lease of this server, its fence on the store, and the controller's hooks."""
    store = controller.store
    lease: Lease
    if lock_fd is not None:
        lease = SoloLease(lock_fd, store.engine, holder, address)
    else:
        url = store.engine.url.render_as_string(hide_password=False)
        lease = PgLease(url, holder, address, ttl_s)
    wake_engine = None if lock_fd is not None else store.engine
    leadership = Leadership(
        lease, Fence(store.engine, lease), controller.instruments, wake_engine=wake_engine
    )
    controller.may_act = leadership.acting
    controller.wake_leader = leadership.wake_leader
    leadership.on_wake = controller.wake
    return leadership


class Takeover:
    """What this server does once elected: the real engine, an empty store bootstrapped, the
    controller started (once the API serves: `serve`)."""

    def __init__(
        self,
        controller: Controller,
        build_engine: Callable[[], Engine],
        data_dir: Path,
        storage_roots: tuple[str, ...],
    ) -> None:
        self.controller = controller
        self._build_engine = build_engine
        self._data_dir, self._roots = data_dir, storage_roots
        self._lock = threading.Lock()
        self._ready = self._serving = self._started = False
        self.took_s: float | None = None  # election → engine built (adoption included)

    def __call__(self, term: int) -> None:
        began = time.monotonic()
        engine = self._build_engine()
        handover = self.controller.engine
        assert isinstance(handover, HandoverEngine)
        handover.become(engine)
        store: Store = self.controller.store
        created = bootstrap(store, engine.nodes(), self._data_dir, self._roots)
        assign_ids(store)
        if created:
            log.info(
                "first start: made the platform admin 'admin' and the tenant 'default'; "
                "the admin's token is in %s",
                created,
            )
        self.took_s = time.monotonic() - began
        log.info("leader (term %d): engine %s ready in %.2f s", term, engine.name, self.took_s)
        with self._lock:
            self._ready = True
            self._start()

    def serve(self) -> None:
        """The API serves: the controller may start (now, or once elected)."""
        with self._lock:
            self._serving = True
            self._start()

    def stop(self) -> None:
        with self._lock:
            self._serving = False
            if self._started:
                self.controller.stop()

    def _start(self) -> None:
        if self._ready and self._serving and not self._started:
            self._started = True
            self.controller.start()
