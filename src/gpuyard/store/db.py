"""Database set-up: the engine (SQLite in WAL mode by default, PostgreSQL by URL) and migrations."""

from __future__ import annotations

import os
import stat
from contextlib import AbstractContextManager
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

from gpuyard.store import revisions

MIGRATIONS = Path(__file__).parent / "migrations"
DB_FILE = "gpuyard.db"


def sqlite_url(data_dir: Path) -> str:
    return f"sqlite:///{data_dir / DB_FILE}"


def private_sqlite(data_dir: Path) -> None:
    """The database file made (empty) with mode 0600 before SQLite opens it, so that SQLite
    gives its `-wal` and `-shm` files the same mode; an existing looser one (and those files)
    tightened to 0600."""
    db = data_dir / DB_FILE
    os.close(os.open(db, os.O_WRONLY | os.O_CREAT, 0o600))
    for path in (db, db.with_name(f"{DB_FILE}-wal"), db.with_name(f"{DB_FILE}-shm")):
        try:
            if stat.S_IMODE(os.stat(path).st_mode) & 0o077:
                os.chmod(path, 0o600)
        except FileNotFoundError:
            pass


# execution option of the write transactions (`Sessions.begin`): on SQLite they begin
# IMMEDIATE (the write lock taken first, so what they read is what they write over); on
# PostgreSQL the rows they change are read FOR UPDATE (store/jobs.py)
WRITE = "gpuyard_write"


def make_engine(url: str) -> Engine:
    if not url.startswith("sqlite"):
        return create_engine(url, pool_pre_ping=True)
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
    event.listen(engine, "connect", _sqlite_pragmas)
    event.listen(engine, "begin", _sqlite_begin)
    return engine


def _sqlite_begin(conn) -> None:  # type: ignore[no-untyped-def]
    """BEGIN ourselves (pysqlite's own begins only at the first write, after the reads):
    IMMEDIATE for write transactions, deferred (a consistent snapshot) for reads."""
    conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(WRITE) else "BEGIN")


def _sqlite_pragmas(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]
    dbapi_conn.isolation_level = None  # no implicit BEGIN: _sqlite_begin says when
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


def alembic_config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest revision (Alembic, from the first table on)."""
    cfg = alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")


class Sessions:
    """The repos' sessions: `sessions()` to read, `sessions.begin()` for a write transaction
    (one that reads rows and writes over them: see WRITE)."""

    def __init__(self, engine: Engine) -> None:
        self._read = sessionmaker(engine, expire_on_commit=False)
        writer = engine.execution_options(**{WRITE: True})
        self._write = sessionmaker(writer, expire_on_commit=False)
        for made in (self._read, self._write):
            revisions.watch(made)

    def __call__(self) -> Session:
        return self._read()

    def begin(self) -> AbstractContextManager[Session]:
        return self._write.begin()


def session_factory(engine: Engine) -> Sessions:
    return Sessions(engine)
