"""A client of the gpuyard REST API on the standard library's `http.client`, for the fast path
(`gpuyard.cli.fast`): httpx costs ~40 ms to import and ~45 ms more to build its TLS context,
which is most of a 100 ms budget. One connection, one request at a time, JSON in and out;
failures are the same three exceptions as `gpuyard.cli.client`'s (`gpuyard.cli.basics`).
"""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlencode, urlsplit

from gpuyard.cli.basics import (
    ApiError,
    ConnectionLost,
    ServerUnreachable,
    api_error,
    jobs_query,
)

#: seconds to connect, and to wait for each answer (as `gpuyard.cli.client`'s timeouts)
CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 30.0

HTTP_ERROR = 400


class PlainClient:
    """The few endpoints the fast path calls, over one `http.client` connection."""

    def __init__(self, url: str, token: str | None) -> None:
        self.url = url.rstrip("/")
        parts = urlsplit(self.url)
        self._prefix = parts.path
        self._headers = {"Accept": "application/json", "User-Agent": "gpuyard-cli"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ServerUnreachable(self.url)
        https = parts.scheme == "https"
        kind = http.client.HTTPSConnection if https else http.client.HTTPConnection
        self._conn = kind(parts.hostname, parts.port, timeout=CONNECT_TIMEOUT)

    def close(self) -> None:
        self._conn.close()

    def submit_job(self, spec: bytes, content_type: str = "application/yaml") -> dict[str, object]:
        """POST /api/v1/jobs with a YAML (or JSON) spec → `{"id", "name", "state"}`."""
        return self.call("POST", "/api/v1/jobs", body=spec, content_type=content_type)

    def list_jobs(
        self,
        states: list[str] | None = None,
        tenant: str | None = None,
        limit: int | None = None,
        filters: dict[str, str | None] | None = None,
    ) -> dict[str, object]:
        """GET /api/v1/jobs → `{"jobs": [JobSummary], "nextCursor"}`, newest first;
        `filters`: `user`, `name`, `since`, `cursor`."""
        query = jobs_query(states, tenant, limit, filters)
        return self.call("GET", "/api/v1/jobs", query=query)

    def call(
        self,
        method: str,
        path: str,
        query: list[tuple[str, str]] | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
    ) -> object:
        """One request; the decoded JSON answer, or one of the three failures."""
        target = self._prefix + path + (f"?{urlencode(query)}" if query else "")
        headers = dict(self._headers)
        if content_type:
            headers["Content-Type"] = content_type
        status, reason, data = self._exchange(method, target, body, headers)
        if status >= HTTP_ERROR:
            raise api_error(status, reason, data)
        try:
            return json.loads(data)
        except ValueError as exc:
            raise ConnectionLost(self.url, f"the reply to {method} {path} is not JSON") from exc

    def _exchange(
        self, method: str, target: str, body: bytes | None, headers: dict[str, str]
    ) -> tuple[int, str, bytes]:
        try:
            self._conn.connect()
        except (OSError, http.client.HTTPException) as exc:
            raise ServerUnreachable(self.url) from exc
        try:
            self._conn.sock.settimeout(READ_TIMEOUT)
            self._conn.request(method, target, body=body, headers=headers)
            response = self._conn.getresponse()
            return response.status, response.reason, response.read()
        except (OSError, http.client.HTTPException) as exc:
            raise ConnectionLost(self.url, str(exc) or type(exc).__name__) from exc


__all__ = ["ApiError", "PlainClient"]
