"""Database set-up: the engine (SQLite in WAL mode by default, PostgreSQL by URL) and migrations."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

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


def make_engine(url: str) -> Engine:
    if not url.startswith("sqlite"):
        return create_engine(url, pool_pre_ping=True)
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
    event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _sqlite_pragmas(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]
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


def session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)
