"""What every client command shares and that needs nothing but the standard library: exit
codes, the three failures (`ServerUnreachable`, `ConnectionLost`, `ApiError`), the saved
login (`~/.config/gpuyard/config.json`), and the words for failures.

Both paths of the command line import it: the fast one (`gpuyard.cli.fast`: `submit` and
`jobs` in tens of milliseconds, docs/cli.md) and the full typer one (`gpuyard.cli.session`
re-exports these names). Keep it free of typer, rich and httpx: each costs the fast path
40-150 ms of imports.

Where the server and token come from, first found wins: `--url` / `GPUYARD_URL`, then the
URL saved by `gpuyard login`, then http://127.0.0.1:8080; `GPUYARD_TOKEN`, then the token
saved by `gpuyard login` *for that same URL* (a saved token is never sent to another server).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

DEFAULT_URL = "http://127.0.0.1:8080"
API = "/api/v1"

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_INTERRUPTED = 130

HTTP_UNAUTHORIZED = 401
HTTP_FORBIDDEN = 403
HTTP_NOT_FOUND = 404
HTTP_CONFLICT = 409
HTTP_INVALID = 422

JOB_STATES = ("QUEUED", "SCHEDULED", "RUNNING", "SUCCEEDED", "FAILED", "STOPPED")
FINAL_STATES = frozenset({"SUCCEEDED", "FAILED", "STOPPED"})


class ServerUnreachable(Exception):
    """Nothing answered at the server URL (refused, unknown host, connect timeout)."""

    def __init__(self, url: str) -> None:
        super().__init__(f"cannot reach gpuyard at {url}")
        self.url = url


class ConnectionLost(Exception):
    """The server was reached but the exchange broke off (reset, timeout, bad reply)."""

    def __init__(self, url: str, cause: str) -> None:
        super().__init__(f"lost the connection to gpuyard at {url}: {cause}")
        self.url = url
        self.cause = cause


class ApiError(Exception):
    """The server answered with an error status; `detail` is its sentence."""

    def __init__(self, status: int, detail: str, errors: list[dict[str, object]] | None = None):
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.errors = errors or []


def api_error(status: int, reason: str, body: bytes) -> ApiError:
    """Read `{"detail", "errors"}` from an error answer's body, tolerating any body."""
    detail = ""
    errors: list[dict[str, object]] = []
    try:
        decoded = json.loads(body)
    except ValueError:
        decoded = None
    if isinstance(decoded, dict):
        detail = str(decoded.get("detail") or "")
        if isinstance(decoded.get("errors"), list):
            errors = [e for e in decoded["errors"] if isinstance(e, dict)]
    if not detail:
        text = body.decode("utf-8", "replace").strip()
        detail = text[:500] if text else f"HTTP {status} {reason}"
    return ApiError(status, detail, errors)


def jobs_query(
    states: list[str] | None,
    tenant: str | None,
    limit: int | None,
    filters: dict[str, str | None] | None = None,
) -> list[tuple[str, str]]:
    """Query parameters of GET /api/v1/jobs: `state` repeated, `tenant`, `limit`, and the
    other `filters` by name (`user`, `name`, `since`, `cursor`); unset ones left out."""
    query: list[tuple[str, str]] = [("state", s) for s in states or []]
    if tenant is not None:
        query.append(("tenant", tenant))
    if limit is not None:
        query.append(("limit", str(limit)))
    query += [(k, v) for k, v in (filters or {}).items() if v is not None]
    return query


def more_jobs_hint(next_cursor: object) -> str | None:
    """What to run for the next page of `gpuyard jobs` (None on the last page)."""
    if not next_cursor:
        return None
    return f"more jobs: add --cursor {next_cursor} (same filters) for the next page"


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


def login_of(url: str | None) -> tuple[str, str | None]:
    """(server URL, token) for this invocation: `--url`, the environment, the saved login."""
    return resolve_login(
        url or os.environ.get("GPUYARD_URL"), os.environ.get("GPUYARD_TOKEN"), load_config()
    )


# -- words -----------------------------------------------------------------------------


def check_states(values: list[str]) -> list[str]:
    """`running` → `RUNNING`; an unknown state is a ValueError that says which are known."""
    states = [v.strip().upper() for v in values]
    for state in states:
        if state not in JOB_STATES:
            raise ValueError(f"{state!r} is not one of {', '.join(JOB_STATES)}")
    return states


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


TENANT_HINT = (
    "a job goes to the tenant its spec names, else `default`: name yours with `tenant: NAME` "
    "in the spec or `gpuyard submit FILE --tenant NAME` (`gpuyard whoami` lists yours)"
)


def submit_error_message(exc: ApiError, tenant_given: bool) -> str:
    """Words for a refused submit; after a 403 without `--tenant`, how to name a tenant."""
    message = error_message(exc)
    if exc.status == HTTP_FORBIDDEN and not tenant_given:
        message += f"\n  {TENANT_HINT}"
    return message


def print_json(data: object) -> None:
    """Raw API JSON on stdout, for scripts (no colours, no wrapping)."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
