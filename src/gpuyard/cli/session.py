"""What every command of the full (typer) command line shares: the per-invocation `Session`
(server URL, token, consoles, client) and turning failures into a sentence and an exit code.
The saved login, exit codes and words are `gpuyard.cli.basics`, which the fast path shares.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import NoReturn

import typer
from rich.console import Console
from rich.text import Text

from gpuyard.cli.basics import (
    EXIT_FAILED,
    EXIT_UNREACHABLE,
    ApiError,
    ConnectionLost,
    ServerUnreachable,
    error_message,
    load_config,
    resolve_login,
    unreachable_message,
)
from gpuyard.cli.client import ApiClient, make_http_client


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


# -- failures for people ---------------------------------------------------------------


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
