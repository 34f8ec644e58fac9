"""What every command shares: the per-invocation `Session` (server URL, token, consoles,
client), the saved login (`~/.config/gpuyard/config.json`), exit codes, and turning
failures into a sentence and an exit code.

Where the server and token come from, first found wins: `--url` / `GPUYARD_URL`, then the
URL saved by `gpuyard login`, then http://127.0.0.1:8080; `GPUYARD_TOKEN`, then the token
saved by `gpuyard login` *for that same URL* (a saved token is never sent to another server).
"""

from __future__ import annotations

import enum
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.text import Text

from gpuyard.cli.client import (
    DEFAULT_URL,
    ApiClient,
    ApiError,
    ConnectionLost,
    ServerUnreachable,
    make_http_client,
)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_INTERRUPTED = 130

HTTP_UNAUTHORIZED = 401
HTTP_NOT_FOUND = 404
HTTP_CONFLICT = 409
HTTP_INVALID = 422


class Output(enum.StrEnum):
    table = "table"
    json = "json"


@dataclass
class Session:
    """Per-invocation state: where the server is, the consoles, a lazily made client."""

    url: str
    token: str | None
    out: Console = field(default_factory=lambda: Console(highlight=False))
    err: Console = field(default_factory=lambda: Console(stderr=True, highlight=False))
    _client: ApiClient | None = None

    @property
    def client(self) -> ApiClient:
        if self._client is None:
            self._client = ApiClient(make_http_client(self.url, self.token))
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


# -- the saved login -------------------------------------------------------------------


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "gpuyard" / "config.json"


def load_config(path: Path | None = None) -> dict[str, str]:
    """The saved `{"url", "token"}`; empty if there is none or it cannot be read."""
    try:
        data = json.loads((path or config_path()).read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, str)} if isinstance(data, dict) else {}


def save_config(url: str, token: str, path: Path | None = None) -> Path:
    """Save the login, readable by its owner only (0600, in a 0700 dir)."""
    path = path or config_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # an older file may have had looser bits
    with os.fdopen(fd, "w") as f:
        json.dump({"url": url, "token": token}, f, indent=2)
        f.write("\n")
    return path


def normalize_url(url: str) -> str:
    """`127.0.0.1:8080` → `http://127.0.0.1:8080`; no trailing slash."""
    url = url.strip().rstrip("/")
    if "://" not in url:
        url = f"http://{url}"
    return url


def resolve_login(
    url: str | None, env_token: str | None, saved: dict[str, str]
) -> tuple[str, str | None]:
    """(server URL, token) by the rules in this module's docstring."""
    saved_url = normalize_url(saved["url"]) if saved.get("url") else None
    chosen = normalize_url(url) if url else saved_url or DEFAULT_URL
    if env_token:
        return chosen, env_token
    return chosen, saved.get("token") if chosen == saved_url else None


# -- failures for people ---------------------------------------------------------------


def unreachable_message(url: str) -> str:
    return (
        f"cannot reach gpuyard at {url}: is the server running? "
        "start it with `make run` or `gpuyard up`"
    )


def error_message(exc: ApiError, job_id: str | None = None) -> str:
    """Words for an HTTP error: `no job X` for an unknown job, else the server's detail."""
    if exc.status == HTTP_NOT_FOUND and job_id is not None:
        return f"no job {job_id}"
    return f"error: {exc.detail} (HTTP {exc.status})"


def print_json(data: Any) -> None:
    """Raw API JSON on stdout, for scripts (no colours, no wrapping)."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def fail(session: Session, message: str, code: int = EXIT_FAILED) -> NoReturn:
    session.err.print(Text(message, style="red"), soft_wrap=True)
    raise typer.Exit(code)


@contextmanager
def api_errors(session: Session, job_id: str | None = None) -> Iterator[None]:
    """Turn expected failures into a sentence and an exit code, never a traceback."""
    try:
        yield
    except ServerUnreachable as exc:
        fail(session, unreachable_message(exc.url), EXIT_UNREACHABLE)
    except ConnectionLost as exc:
        fail(session, str(exc), EXIT_UNREACHABLE)
    except ApiError as exc:
        fail(session, error_message(exc, job_id))


def session_of(ctx: typer.Context) -> Session:
    """The `Session` the app callback made for this invocation."""
    session = ctx.find_object(Session)
    if session is None:  # a command invoked without the app callback (should not happen)
        url, token = resolve_login(None, os.environ.get("GPUYARD_TOKEN"), load_config())
        session = Session(url=url, token=token)
        ctx.obj = session
    return session
