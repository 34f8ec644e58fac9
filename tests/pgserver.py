"""A throw-away PostgreSQL server for the tests: Debian's `postgresql` binaries, `initdb` and
`pg_ctl` in a temporary directory, a Unix socket only (no TCP port, no system service).

One server per test session (`PgServer.start`); each test gets a fresh database copied from a
template that the migrations already brought to head (`CREATE DATABASE ... TEMPLATE`: a few
ms). PostgreSQL refuses to run as root, so as root the server runs as the `postgres` user the
Debian package makes (`runuser -u postgres`); as anyone else, as that user. The server is
tuned for tests (fsync, synchronous_commit and full_page_writes off): nothing here is durable.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

from gpuyard.store import open_store

TEMPLATE = "gpuyard_template"
SUPERUSER = "postgres"
RUN_AS = "postgres"  # the user root runs the server as (Debian's package makes it)
TEST_SETTINGS = (
    "fsync=off",
    "synchronous_commit=off",
    "full_page_writes=off",
    "listen_addresses=''",
    "max_connections=200",
    "wal_level=minimal",
    "max_wal_senders=0",
    "max_wal_size=64MB",
)
# the server's directory: in memory where there is a tmpfs (no disk writes, a fast clean-up)
SCRATCH = ("/dev/shm", None)


class PgUnavailable(RuntimeError):
    """No PostgreSQL server can be started here; the text says why (a test skip's reason)."""


def pg_bindir() -> Path:
    """Where initdb and pg_ctl are: $GPUYARD_PG_BIN, else Debian's newest
    /usr/lib/postgresql/N/bin, else the PATH."""
    if env := os.environ.get("GPUYARD_PG_BIN"):
        return Path(env)
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_version)
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    if initdb is None:
        raise PgUnavailable(
            "no initdb: install Debian's postgresql (make system-test) or set GPUYARD_PG_BIN"
        )
    return Path(initdb).parent


def _version(path: str) -> int:
    part = Path(path).parent.parent.name
    return int(part) if part.isdigit() else 0


def _scratch() -> str | None:
    return next((d for d in SCRATCH if d is None or os.access(d, os.W_OK | os.X_OK)), None)


def _run_as_prefix() -> list[str]:
    """As root: run the server's commands as `postgres` (initdb refuses root)."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam(RUN_AS)
    except KeyError as e:
        raise PgUnavailable(f"running as root and there is no {RUN_AS!r} user to run as") from e
    return ["runuser", "-u", RUN_AS, "--"]


@dataclass
class PgServer:
    root: Path  # data dir, socket dir and log, all below it
    bindir: Path
    prefix: list[str]
    made: list[str] = field(default_factory=list)

    @property
    def socket_dir(self) -> Path:
        return self.root / "socket"

    @classmethod
    def start(cls) -> PgServer:
        """initdb + pg_ctl start in a new temporary directory; the template database made."""
        bindir, prefix = pg_bindir(), _run_as_prefix()
        root = Path(tempfile.mkdtemp(prefix="gpuyard-pg-", dir=_scratch()))
        if prefix:
            shutil.chown(root, RUN_AS)
        server = cls(root, bindir, prefix)
        try:
            server._initdb()
            server._pg_ctl("start", "-w", "-t", "60", "-l", str(root / "log"))
            server._make_template()
        except BaseException:
            server.stop()
            raise
        return server

    def _cmd(self, *args: str) -> None:
        try:
            cmd = [*self.prefix, *args]
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        except OSError as e:  # no such binary
            raise PgUnavailable(f"cannot run {args[0]}: {e}") from e
        if done.returncode != 0:
            raise PgUnavailable(f"{Path(args[0]).name} failed: {done.stderr.strip()[-2000:]}")

    def _initdb(self) -> None:
        self._cmd(
            str(self.bindir / "initdb"), "-D", str(self.root / "data"), "-U", SUPERUSER,
            "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync",
        )  # fmt: skip
        self._cmd("mkdir", str(self.socket_dir))

    def _pg_ctl(self, *args: str) -> None:
        options = " ".join(f"-c {s}" for s in TEST_SETTINGS)
        options += f" -c unix_socket_directories={self.socket_dir}"
        self._cmd(str(self.bindir / "pg_ctl"), "-D", str(self.root / "data"), "-o", options, *args)

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://{SUPERUSER}@/{database}?host={self.socket_dir}"

    def _admin(self, sql: str) -> None:
        conninfo = f"host={self.socket_dir} user={SUPERUSER} dbname=postgres"
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(sql)

    def _make_template(self) -> None:
        """The template: an empty database that the migrations brought to head."""
        self._admin(f"CREATE DATABASE {TEMPLATE}")
        open_store(self.root / "template-data", url=self.url(TEMPLATE)).close()

    def fresh_database(self) -> str:
        """A new database at the schema's head (a copy of the template); its URL."""
        name = f"t_{uuid.uuid4().hex[:16]}"
        self._admin(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE} STRATEGY FILE_COPY")
        self.made.append(name)
        return self.url(name)

    def empty_database(self) -> str:
        """A new database with no tables at all (for the migrations themselves); its URL."""
        name = f"e_{uuid.uuid4().hex[:16]}"
        self._admin(f"CREATE DATABASE {name}")
        self.made.append(name)
        return self.url(name)

    def drop(self, url: str) -> None:
        """Drop the database of `url` (its connections ended first)."""
        name = make_url(url).database
        self._admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def stop(self) -> None:
        """Stop the server (fast: its connections are ended) and remove its directory."""
        if (self.root / "data" / "postmaster.pid").exists():
            with contextlib.suppress(PgUnavailable):
                self._pg_ctl("stop", "-m", "immediate", "-w", "-t", "30")
        shutil.rmtree(self.root, ignore_errors=True)
