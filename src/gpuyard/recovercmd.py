"""`gpuyard admin recover --data-dir D`: a way back in once every admin token is lost or
revoked, for whoever may open the server's data dir on its machine.

It opens the store directly (no HTTP, no running server needed): makes the user `admin` a
platform admin again (created if it is gone), gives it a new API token, writes the token to
a 0600 file (`<data dir>/recovered-admin-token` unless `--token-file`) and prints where. It
refuses, changing nothing, if the data dir holds no gpuyard database or cannot be opened.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Annotated

import typer
from alembic.util.exc import CommandError
from sqlalchemy.exc import SQLAlchemyError

from gpuyard.api.services.bootstrap import ADMIN, write_secret
from gpuyard.store import PlatformRole, Store, open_store
from gpuyard.store.db import DB_FILE

TOKEN_FILE = "recovered-admin-token"

recover_app = typer.Typer(add_completion=False)


class CannotRecover(Exception):
    """The data dir cannot be used; the message says why."""


@recover_app.command()
def recover(
    data_dir: Annotated[Path, typer.Option(help="the server's data dir (`gpuyard up --data-dir`)")],
    db_url: Annotated[
        str | None, typer.Option(help="the server's database URL, if it is not SQLite")
    ] = None,
    token_file: Annotated[
        Path | None,
        typer.Option(help="where to write the token (default: DATA_DIR/" + TOKEN_FILE + ")"),
    ] = None,
) -> None:
    """Make a new platform-admin token from the server's data dir (no HTTP).

    For when every admin token is lost or revoked: run it on the server's machine as the user
    the server runs as."""
    data_dir = data_dir.expanduser()
    try:
        check_data_dir(data_dir, db_url)
        path, role_was = recover_admin(data_dir, db_url, token_file or data_dir / TOKEN_FILE)
    except CannotRecover as e:
        typer.echo(f"gpuyard admin recover: {e}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"{ADMIN}: {role_was}; a new platform-admin token is in {path} (mode 0600)")
    typer.echo(f"log in with: gpuyard login --url URL --token-file {path}")


def check_data_dir(data_dir: Path, db_url: str | None) -> None:
    """CannotRecover unless this user may read and write the data dir (and its SQLite
    database, without `db_url`)."""
    db = data_dir / DB_FILE
    try:
        if not stat.S_ISDIR(os.stat(data_dir).st_mode):
            raise CannotRecover(f"{data_dir} is not a directory: give the server's --data-dir")
        if not os.access(data_dir, os.R_OK | os.W_OK | os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
        if db_url is None and not os.access(db, os.R_OK | os.W_OK):
            os.stat(db)  # FileNotFoundError, or it is there but not ours
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
    except FileNotFoundError:
        where = "holds no gpuyard database" if data_dir.is_dir() else "does not exist"
        raise CannotRecover(f"{data_dir} {where}: give the server's --data-dir") from None
    except OSError as e:
        raise CannotRecover(
            f"cannot open the data dir {data_dir} ({e.strerror}): run this on the server's "
            "machine as the user the server runs as"
        ) from None


def recover_admin(data_dir: Path, db_url: str | None, token_file: Path) -> tuple[Path, str]:
    """The file with a new token of `admin`, and what was done to the user."""
    try:
        store = open_store(data_dir, db_url)
    except (SQLAlchemyError, CommandError, OSError) as e:
        raise CannotRecover(f"cannot open the store of {data_dir}: {e}") from e
    try:
        role_was = ensure_admin(store)
        made = store.tokens.create(ADMIN, "recover")
    finally:
        store.close()
    return write_secret(token_file, made.secret), role_was


def ensure_admin(store: Store) -> str:
    """`admin` a platform admin, created if missing; what was done."""
    user = store.users.get(ADMIN)
    if user is None:
        store.users.create(ADMIN, PlatformRole.ADMIN)
        return "re-created as a platform admin"
    if not user.is_admin:
        store.users.set_role(ADMIN, PlatformRole.ADMIN)
        return "made a platform admin again"
    return "already a platform admin"
