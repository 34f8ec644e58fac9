"""The leader lease's SQL (docs/ha.md): one row saying which server leads (runs the
controller), its term and its last heartbeat, and, on PostgreSQL, the session advisory lock
that only the leader holds. The election itself is `controller/leader.py`'s.

Every statement here runs on a connection the caller gives: the leader's dedicated lock
connection (autocommit), or a transaction of the controller's (`term_for_share`, the fence).
Times are the database's clock (`clock_timestamp()`), so servers on several machines compare
a heartbeat's age without trusting each other's clocks.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, Float, Integer, String, text
from sqlalchemy.orm import Mapped, mapped_column

from gpuyard.store.tables import Base

LEADER_LOCK = 0x67707964_00000002  # the leader's session advisory lock (SUBMIT_LOCK is ..01)
WAKE_CHANNEL = "gpuyard_wake"  # NOTIFY'd by a follower that took a submission or a cancel


class LeaseRow(Base):
    """The one row (id 1) of the leader lease."""

    __tablename__ = "leader_lease"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    term: Mapped[int] = mapped_column(Integer)  # +1 at each election
    holder: Mapped[str] = mapped_column(String(128))  # the leader's server id
    address: Mapped[str] = mapped_column(String(256))  # its API's URL
    backend_pid: Mapped[int | None] = mapped_column(Integer)  # its lock connection's backend
    renewed_at: Mapped[float] = mapped_column(Float)  # its last heartbeat (database clock)


@dataclass(frozen=True, slots=True)
class LeaseInfo:
    term: int
    holder: str
    address: str
    backend_pid: int | None
    renewed_at: float
    age_s: float  # the database's now - renewed_at


def _now(conn: Connection) -> str:
    """The database's clock in epoch seconds, as SQL."""
    if conn.dialect.name == "postgresql":
        return "extract(epoch from clock_timestamp())"
    return "((julianday('now') - 2440587.5) * 86400.0)"


def read_lease(conn: Connection) -> LeaseInfo | None:
    row = conn.execute(
        text(
            "SELECT term, holder, address, backend_pid, renewed_at, "
            f"{_now(conn)} - renewed_at FROM leader_lease WHERE id = 1"
        )
    ).first()
    return None if row is None else LeaseInfo(*row)


def take_lease(conn: Connection, holder: str, address: str, backend_pid: int | None) -> int:
    """Become the leader: the term one up (1 on an empty table), this server's id and
    heartbeat written; the new term. Waits for the transactions that hold the row FOR SHARE
    (an old leader's fenced writes) to end, so none of them commits after it."""
    return int(
        conn.execute(
            text(
                "INSERT INTO leader_lease (id, term, holder, address, backend_pid, renewed_at) "
                f"VALUES (1, 1, :holder, :address, :pid, {_now(conn)}) "
                "ON CONFLICT (id) DO UPDATE SET term = leader_lease.term + 1, "
                "holder = excluded.holder, address = excluded.address, "
                "backend_pid = excluded.backend_pid, renewed_at = excluded.renewed_at "
                "RETURNING term"
            ),
            {"holder": holder, "address": address, "pid": backend_pid},
        ).scalar_one()
    )


def renew_lease(conn: Connection, holder: str, term: int) -> bool:
    """The heartbeat: True if this server still holds `term` (its row was renewed)."""
    done = conn.execute(
        text(
            f"UPDATE leader_lease SET renewed_at = {_now(conn)} "
            "WHERE id = 1 AND holder = :holder AND term = :term"
        ),
        {"holder": holder, "term": term},
    )
    return done.rowcount == 1


def expire_lease(conn: Connection, holder: str, term: int) -> None:
    """A leader that stops on purpose: its heartbeat set to 0 so that a follower need not
    wait out the lease's time to live."""
    conn.execute(
        text("UPDATE leader_lease SET renewed_at = 0 WHERE id = 1 AND holder = :h AND term = :t"),
        {"h": holder, "t": term},
    )


def term_for_share(conn: Connection) -> int | None:
    """The current term, the row locked FOR SHARE until the caller's transaction ends: a
    takeover (`take_lease`) waits for it, and any later transaction sees the new term."""
    lock = " FOR SHARE" if conn.dialect.name == "postgresql" else ""
    return conn.execute(text(f"SELECT term FROM leader_lease WHERE id = 1{lock}")).scalar()


# ---- PostgreSQL only: the lock, its holder, the wake-up channel ------------------------------


def try_lock(conn: Connection) -> bool:
    return bool(conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": LEADER_LOCK}).scalar())


def unlock(conn: Connection) -> None:
    conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": LEADER_LOCK})


def backend_pid(conn: Connection) -> int:
    return int(conn.execute(text("SELECT pg_backend_pid()")).scalar_one())


def lock_holder(conn: Connection) -> int | None:
    """The backend pid that holds the leader's lock in this database, if any."""
    return conn.execute(
        text(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND classid = :hi AND objid = :lo AND objsubid = 1"
        ),
        {"hi": LEADER_LOCK >> 32, "lo": LEADER_LOCK & 0xFFFFFFFF},
    ).scalar()


def end_backend(conn: Connection, pid: int) -> bool:
    """End a stalled leader's lock connection (its lock goes with it)."""
    return bool(conn.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid}).scalar())


def listen_wake(conn: Connection) -> None:
    conn.exec_driver_sql(f"LISTEN {WAKE_CHANNEL}")


def notify_wake(conn: Connection) -> None:
    conn.execute(text("SELECT pg_notify(:c, '')"), {"c": WAKE_CHANNEL})
