"""The leader lease (docs/ha.md): which of several servers on one database runs the
controller, and the fence that stops a server that lost it from acting.

- `PgLease` (PostgreSQL): a session advisory lock (`store/lease.py: LEADER_LOCK`) held on a
  dedicated connection, plus the lease row: term, holder, address, heartbeat. The leader
  renews the row every second; it may act only until `sent + ttl`, where `sent` is when it
  sent its last renewal that succeeded (its own monotonic clock). A contender that gets the
  lock still waits until the row's heartbeat is `ttl` old by the database's clock, then takes
  the row (term + 1). A leader that is alive but stalled keeps its lock (its connection
  lives), so a contender that sees the lock's holder is the row's leader and its heartbeat
  older than `ttl` ends that backend (`pg_terminate_backend`) and tries again.
- `SoloLease` (SQLite): one server per data dir, by an exclusive `flock` on
  `<data dir>/server.lock` naming the holder's pid; it leads at once and always.
- `Fence`: every database transaction begun by a thread that asked `acting()` reads the
  lease's term `FOR SHARE` and is refused (`Fenced`) if the term moved on. A takeover
  (`take_lease`) waits for such transactions to end, so no write of an old leader commits
  after a new leader was elected. The argument in full: docs/ha.md, *Split brain*.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from gpuyard.store.lease import (
    LeaseInfo,
    backend_pid,
    end_backend,
    expire_lease,
    listen_wake,
    lock_holder,
    read_lease,
    renew_lease,
    take_lease,
    term_for_share,
    try_lock,
    unlock,
)

log = logging.getLogger("gpuyard.leader")

LEASE_TTL_S = 4.0  # a leader acts at most this long after its last heartbeat that succeeded
LOCK_FILE = "server.lock"  # SQLite: <data dir>/server.lock, flock'ed, holds the server's pid


class Fenced(RuntimeError):
    """A transaction of a server that is no longer the leader (the lease's term moved on)."""


class DataDirInUse(RuntimeError):
    """Another server holds the SQLite data dir (its pid in the message)."""


class Lease(Protocol):
    holder: str
    term: int | None

    def acquire(self) -> int | None: ...

    def renew(self) -> bool: ...

    def holding(self) -> bool: ...

    def wait_wake(self, timeout_s: float) -> bool: ...

    def current(self) -> LeaseInfo | None: ...

    def release(self) -> None: ...


class PgLease:
    """This server's hold on the lease on PostgreSQL (see the module's docstring)."""

    def __init__(
        self,
        url: str,
        holder: str,
        address: str,
        ttl_s: float = LEASE_TTL_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.holder, self.address, self.ttl_s = holder, address, ttl_s
        self._mono = monotonic
        # its own connection, outside the store's pool: the lock lives as long as it does
        self._engine = create_engine(url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
        self._conn: Connection | None = None
        self._locked = False
        self.term: int | None = None
        self._deadline = float("-inf")
        self._lost = False

    def _connection(self) -> Connection:
        if self._conn is None or self._conn.closed or self._conn.invalidated:
            self._drop()
            self._conn = self._engine.connect()
            self._locked = False
        return self._conn

    def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(SQLAlchemyError):
                self._conn.close()
        self._conn, self._locked = None, False

    def acquire(self) -> int | None:
        """One try to lead: the new term, or None (another leads, or may still act)."""
        if self.term is not None:
            return self.term if self.holding() else None
        try:
            return self._try_acquire()
        except SQLAlchemyError as e:
            log.warning("leader lease: %s", e)
            self._drop()
            return None

    def _try_acquire(self) -> int | None:
        conn = self._connection()
        if not self._locked:
            if not try_lock(conn):
                self._end_stalled(conn)
                return None
            self._locked = True
        info = read_lease(conn)
        if info is not None and info.holder != self.holder and info.age_s < self.ttl_s:
            return None  # the last leader may act until its heartbeat is ttl old
        sent = self._mono()
        self.term = take_lease(conn, self.holder, self.address, backend_pid(conn))
        self._deadline = sent + self.ttl_s
        listen_wake(conn)
        log.info("leader lease: this server (%s) leads, term %d", self.holder, self.term)
        return self.term

    def _end_stalled(self, conn: Connection) -> None:
        """The lock is held: if by the row's leader whose heartbeat stopped, end its lock
        connection (it can no longer act: its lease ran out), so the lock comes free."""
        info = read_lease(conn)
        if info is None or info.age_s < self.ttl_s or info.backend_pid is None:
            return
        if lock_holder(conn) == info.backend_pid:
            log.warning(
                "leader lease: %s (term %d) has not renewed for %.1f s; ending its connection",
                info.holder, info.term, info.age_s,
            )  # fmt: skip
            end_backend(conn, info.backend_pid)

    def renew(self) -> bool:
        """The heartbeat; False (and never True again) once the lease is lost."""
        if self.term is None or self._lost:
            return False
        sent = self._mono()
        try:
            ok = renew_lease(self._connection(), self.holder, self.term) and self._locked
        except SQLAlchemyError as e:
            log.error("leader lease: the heartbeat failed: %s", e)
            ok = False
        if ok:
            self._deadline = sent + self.ttl_s
        else:
            self._lost = True
        return ok

    def holding(self) -> bool:
        return self.term is not None and not self._lost and self._mono() < self._deadline

    def wait_wake(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` for a follower's NOTIFY on the lock connection (leader only);
        True if one came."""
        conn = self._conn
        if conn is None or self.term is None:
            time.sleep(timeout_s)
            return False
        try:
            driver = conn.connection.driver_connection
            return any(True for _ in driver.notifies(timeout=timeout_s, stop_after=1))  # type: ignore[union-attr]
        except Exception as e:  # the connection broke: the next renewal says so
            log.warning("leader lease: waiting for wake-ups: %s", e)
            return False

    def current(self) -> LeaseInfo | None:
        """The lease row as it is now (a short connection of its own)."""
        with self._engine.connect() as conn:
            return read_lease(conn)

    def release(self) -> None:
        """Stop leading on purpose: the heartbeat zeroed (a follower takes over at once),
        the lock and its connection let go."""
        if self._conn is not None and self.term is not None and not self._lost:
            with contextlib.suppress(SQLAlchemyError):
                expire_lease(self._conn, self.holder, self.term)
                if self._locked:
                    unlock(self._conn)
        self._lost = True
        self._drop()
        self._engine.dispose()


class SoloLease:
    """SQLite: the one server of its data dir (an exclusive flock); it always leads."""

    def __init__(self, lock_fd: int, store_engine: Engine, holder: str, address: str) -> None:
        self.holder, self.address = holder, address
        self._engine = store_engine
        self.term: int | None = None
        self._fd = lock_fd  # lock_data_dir's, taken before the store was opened

    def acquire(self) -> int | None:
        if self.term is None:
            with self._engine.begin() as conn:
                self.term = take_lease(conn, self.holder, self.address, None)
        return self.term

    def renew(self) -> bool:
        return True  # nothing else can take it while the flock is held

    def holding(self) -> bool:
        return self.term is not None

    def wait_wake(self, timeout_s: float) -> bool:
        time.sleep(timeout_s)
        return False

    def current(self) -> LeaseInfo | None:
        with self._engine.connect() as conn:
            return read_lease(conn)

    def release(self) -> None:
        os.close(self._fd)  # the flock goes with it


def lock_data_dir(data_dir: Path) -> int:
    """Hold `<data dir>/server.lock` (flock, exclusive) with this pid in it; `DataDirInUse`
    naming the holder's pid if another server holds it. The fd keeps the lock: never closed
    before the process ends (an exit of any kind lets it go)."""
    path = data_dir / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise DataDirInUse(
            f"another gpuyard server (pid {holder}) uses the data dir {data_dir}: SQLite allows "
            "one server per data dir (several servers need PostgreSQL: docs/ha.md)"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


class Fence:
    """Refuses the database work of a server that lost the lease: each transaction begun by
    a thread that asked `acting()` checks the term (FOR SHARE) first (PostgreSQL only)."""

    def __init__(self, store_engine: Engine, lease: Lease) -> None:
        self._lease = lease
        self._marked = threading.local()
        if store_engine.dialect.name == "postgresql":
            event.listen(store_engine, "begin", self._on_begin)

    def mark(self) -> None:
        """The calling thread acts for the leader: its transactions are fenced from now on."""
        self._marked.on = True

    def _on_begin(self, conn: Connection) -> None:
        if not getattr(self._marked, "on", False):
            return
        term = term_for_share(conn)
        if term is None or term != self._lease.term:
            raise Fenced(f"the lease's term is {term}, this server's {self._lease.term}")
