"""A thin client of the gpuyard REST API (docs/api.md): one method per endpoint.

`ApiClient` wraps an `httpx.Client` (built by `make_http_client`, or given by a test with
its own transport). Methods return the decoded JSON as plain dicts, or text for logs.
Failures come out as three exceptions a command can turn into words for people:
`ServerUnreachable` (nothing listens at the URL), `ConnectionLost` (it went away mid-call)
and `ApiError` (the server answered with an error status).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from gpuyard.cli.basics import (
    API,
    DEFAULT_URL,
    HTTP_NOT_FOUND,
    ApiError,
    ConnectionLost,
    ServerUnreachable,
    api_error,
    jobs_query,
)

__all__ = ["DEFAULT_URL", "ApiClient", "ApiError", "ConnectionLost", "ServerUnreachable"]

#: Ordinary calls: bounded everywhere.
DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=5.0)
#: Following logs: bounded to connect, unbounded between chunks (a quiet task is fine).
FOLLOW_TIMEOUT = httpx.Timeout(30.0, connect=5.0, read=None)
#: An image import or gc on nodes: each node's store works through it (minutes for GBs).
IMAGE_TIMEOUT = httpx.Timeout(600.0, connect=5.0)


def make_http_client(url: str = DEFAULT_URL, token: str | None = None) -> httpx.Client:
    """An `httpx.Client` for the server at `url`, sending `token` as a bearer token if set."""
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=DEFAULT_TIMEOUT)


def error_from_response(response: httpx.Response) -> ApiError:
    """Read `{"detail", "errors"}` from an error response, tolerating any body."""
    return api_error(response.status_code, response.reason_phrase, response.content)


def logs_params(
    task: str | None = None,
    attempt: int | None = None,
    tail: int | None = None,
    follow: bool = False,
) -> dict[str, str]:
    """Query parameters of the logs endpoint; unset ones are left out."""
    params: dict[str, str] = {}
    if task is not None:
        params["task"] = task
    if attempt is not None:
        params["attempt"] = str(attempt)
    if tail is not None:
        params["tail"] = str(tail)
    if follow:
        params["follow"] = "true"
    return params


class ApiClient:
    """One method per REST endpoint of docs/api.md."""

    def __init__(self, http: httpx.Client) -> None:
        self._http = http

    @property
    def url(self) -> str:
        return str(self._http.base_url).rstrip("/")

    def close(self) -> None:
        self._http.close()

    # -- endpoints -------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """GET /healthz."""
        return self._json("GET", "/healthz")

    def submit_job(self, spec: bytes, content_type: str = "application/yaml") -> dict[str, Any]:
        """POST /api/v1/jobs with a YAML (or JSON) spec → `{"id", "name", "state"}`."""
        return self._json(
            "POST", f"{API}/jobs", content=spec, headers={"Content-Type": content_type}
        )

    def list_jobs(
        self,
        states: list[str] | None = None,
        tenant: str | None = None,
        limit: int | None = None,
        filters: dict[str, str | None] | None = None,
    ) -> dict[str, Any]:
        """GET /api/v1/jobs → `{"jobs": [JobSummary], "nextCursor"}`, newest first;
        `filters`: `user`, `name`, `since`, `cursor`."""
        query = jobs_query(states, tenant, limit, filters)
        return self._json("GET", f"{API}/jobs", params=query)

    def get_job(self, job_id: str) -> dict[str, Any]:
        """GET /api/v1/jobs/{id} → JobDetail."""
        return self._json("GET", f"{API}/jobs/{job_id}")

    def get_array(self, array_id: str) -> dict[str, Any]:
        """GET /api/v1/arrays/{id} → ArrayDetail (its summary and `children`)."""
        return self._json("GET", f"{API}/arrays/{array_id}")

    def get_job_or_array(self, job_id: str) -> dict[str, Any]:
        """The job of this id, else the job array (with `children`); a 404 if neither."""
        try:
            return self.get_job(job_id)
        except ApiError as exc:
            if exc.status != HTTP_NOT_FOUND:
                raise
            try:
                return self.get_array(job_id)
            except ApiError as again:
                if again.status != HTTP_NOT_FOUND:
                    raise
                raise exc from None

    def cancel_array(self, array_id: str) -> dict[str, Any]:
        """POST /api/v1/arrays/{id}/cancel → `{"id", "state", "cancelled"}`."""
        return self._json("POST", f"{API}/arrays/{array_id}/cancel")

    def cancel_job(self, job_id: str) -> dict[str, Any]:
        """POST /api/v1/jobs/{id}/cancel → `{"id", "state"}`; 409 if it already ended."""
        return self._json("POST", f"{API}/jobs/{job_id}/cancel")

    def cancel_jobs(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST /api/v1/jobs/bulk/cancel with filters (and `dryRun`) → cancelled and refused."""
        return self._json("POST", f"{API}/jobs/bulk/cancel", json=body)

    def resubmit_job(self, job_id: str, sets: dict[str, Any]) -> dict[str, Any]:
        """POST /api/v1/jobs/{id}/resubmit with `{"set": {path: value}}` → the new job."""
        return self._json("POST", f"{API}/jobs/{job_id}/resubmit", json={"set": sets})

    def job_action(
        self, job_id: str, action: str, body: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """POST /api/v1/jobs/{id}/{hold|release|priority} → the JobSummary."""
        return self._json("POST", f"{API}/jobs/{job_id}/{action}", json=body)

    def job_events(self, job_id: str) -> dict[str, Any]:
        """GET /api/v1/jobs/{id}/events → `{"events": [Event]}`, oldest first."""
        return self._json("GET", f"{API}/jobs/{job_id}/events")

    def job_logs(
        self,
        job_id: str,
        task: str | None = None,
        attempt: int | None = None,
        tail: int | None = None,
    ) -> str:
        """GET /api/v1/jobs/{id}/logs, all at once (not following)."""
        response = self._request(
            "GET", f"{API}/jobs/{job_id}/logs", params=logs_params(task, attempt, tail)
        )
        return response.text

    def stream_logs(
        self,
        job_id: str,
        task: str | None = None,
        attempt: int | None = None,
        tail: int | None = None,
        follow: bool = False,
    ) -> Iterator[str]:
        """GET /api/v1/jobs/{id}/logs as it arrives; with `follow`, until the task ends.

        A generator: close it (or let it run out) to close the connection.
        """
        params = logs_params(task, attempt, tail, follow)
        timeout = FOLLOW_TIMEOUT if follow else DEFAULT_TIMEOUT
        path = f"{API}/jobs/{job_id}/logs"
        with (
            self._translate_errors(),
            self._http.stream("GET", path, params=params, timeout=timeout) as response,
        ):
            if response.is_error:
                response.read()
                raise error_from_response(response)
            yield from response.iter_text()

    def nodes(self) -> dict[str, Any]:
        """GET /api/v1/nodes → `{"nodes": [Node]}`."""
        return self._json("GET", f"{API}/nodes")

    def node_action(self, name: str, action: str, body: dict[str, Any] | None) -> dict[str, Any]:
        """POST /api/v1/nodes/{name}/{cordon|drain|uncordon} → the node as listed."""
        return self._json("POST", f"{API}/nodes/{quote(name, safe='')}/{action}", json=body)

    def queue(self) -> dict[str, Any]:
        """GET /api/v1/queue → `{"cluster": [FlavorCapacity], "tenants": [TenantQueue]}`."""
        return self._json("GET", f"{API}/queue")

    def usage(self, params: dict[str, str]) -> dict[str, Any]:
        """GET /api/v1/usage?by=&since=&until=&tenant= → `{"rows", "total", ...}`."""
        return self._json("GET", f"{API}/usage", params=params)

    def notifications(self, user: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """GET (or PUT `body`) /api/v1/users/{user}/notifications → `{"user", "email", ...}`."""
        path = f"{API}/users/{quote(user, safe='')}/notifications"
        return self._json("GET", path) if body is None else self._json("PUT", path, json=body)

    def mail_settings(self, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """GET (or PUT `body`) /api/v1/settings/mail → the relay, never its password."""
        path = f"{API}/settings/mail"
        return self._json("GET", path) if body is None else self._json("PUT", path, json=body)

    # -- users, tokens, tenants ------------------------------------------------------

    def whoami(self) -> dict[str, Any]:
        """GET /api/v1/whoami → `{"name", "role", "admin", "memberships"}`."""
        return self._json("GET", f"{API}/whoami")

    def create_user(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST /api/v1/users with `{"name", "admin", "memberships": [{"tenant", "role"}]}`."""
        return self._json("POST", f"{API}/users", json=body)

    def list_users(self) -> dict[str, Any]:
        """GET /api/v1/users → `{"users": [User]}`."""
        return self._json("GET", f"{API}/users")

    def create_token(
        self, user: str, name: str = "cli", expires_in_days: float | None = None
    ) -> dict[str, Any]:
        """POST /api/v1/users/{user}/tokens → the token record with `token`, shown once."""
        body: dict[str, Any] = {"name": name}
        if expires_in_days is not None:
            body["expiresInDays"] = expires_in_days
        return self._json("POST", f"{API}/users/{user}/tokens", json=body)

    def get_leader(self) -> dict[str, Any]:
        """GET /api/v1/leader → which server leads, its term, this server's role."""
        return self._json("GET", f"{API}/leader")

    def list_tenants(self) -> dict[str, Any]:
        """GET /api/v1/tenants → `{"tenants": [Tenant]}`."""
        return self._json("GET", f"{API}/tenants")

    def get_tenant(self, name: str) -> dict[str, Any]:
        """GET /api/v1/tenants/{name} → Tenant."""
        return self._json("GET", f"{API}/tenants/{name}")

    def create_tenant(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST /api/v1/tenants with a Tenant (only `name` is required)."""
        return self._json("POST", f"{API}/tenants", json=body)

    def update_tenant(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """PATCH /api/v1/tenants/{name}: the given fields change, the others stay."""
        return self._json("PATCH", f"{API}/tenants/{name}", json=body)

    def list_members(self, tenant: str) -> dict[str, Any]:
        """GET /api/v1/tenants/{tenant}/members → `{"members": [{"user", "role"}]}`."""
        return self._json("GET", f"{API}/tenants/{tenant}/members")

    def set_member(self, tenant: str, user: str, role: str) -> None:
        """PUT /api/v1/tenants/{tenant}/members/{user} with `{"role"}`."""
        self._request("PUT", f"{API}/tenants/{tenant}/members/{user}", json={"role": role})

    def remove_member(self, tenant: str, user: str) -> None:
        """DELETE /api/v1/tenants/{tenant}/members/{user}."""
        self._request("DELETE", f"{API}/tenants/{tenant}/members/{user}")

    def registries(self, tenant: str) -> dict[str, Any]:
        """GET /api/v1/tenants/{tenant}/registries → `{"registries": [{"registry",
        "username", "updatedAt", "updatedBy"}]}`, never a password."""
        return self._json("GET", f"{API}/tenants/{quote(tenant, safe='')}/registries")

    def set_registry(self, tenant: str, registry: str, body: dict[str, Any]) -> dict[str, Any]:
        """PUT /api/v1/tenants/{tenant}/registries/{registry} with `{"username", "password"}`
        or `{"token"}` → the entry as listed."""
        path = f"{API}/tenants/{quote(tenant, safe='')}/registries/{quote(registry, safe='')}"
        return self._json("PUT", path, json=body)

    def remove_registry(self, tenant: str, registry: str) -> None:
        """DELETE /api/v1/tenants/{tenant}/registries/{registry}."""
        path = f"{API}/tenants/{quote(tenant, safe='')}/registries/{quote(registry, safe='')}"
        self._request("DELETE", path)

    def storage(self, tenant: str) -> dict[str, Any]:
        """GET /api/v1/tenants/{tenant}/storage → `{"storage": [{"name", "path", "mountPoint",
        "readOnly", "updatedAt", "updatedBy"}]}`."""
        return self._json("GET", f"{API}/tenants/{quote(tenant, safe='')}/storage")

    def set_storage(self, tenant: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """PUT /api/v1/tenants/{tenant}/storage/{name} with `{"path", "mountPoint",
        "readOnly"}` → the entry as listed."""
        path = f"{API}/tenants/{quote(tenant, safe='')}/storage/{quote(name, safe='')}"
        return self._json("PUT", path, json=body)

    def remove_storage(self, tenant: str, name: str) -> None:
        """DELETE /api/v1/tenants/{tenant}/storage/{name}."""
        self._request("DELETE", f"{API}/tenants/{quote(tenant, safe='')}/storage/"
                      f"{quote(name, safe='')}")  # fmt: skip

    # -- the nodes' images (platform admins) --------------------------------------------

    def images(self, nodes: list[str] | None = None) -> dict[str, Any]:
        """GET /api/v1/images[?node=N...] → `{"images": [{name, nodes}], "unreachable"}`."""
        return self._json("GET", f"{API}/images", params={"node": nodes} if nodes else None)

    def image_state(self, image: str, nodes: list[str] | None = None) -> dict[str, Any]:
        """GET /api/v1/images/state?image=X[&node=N...] → `{"image", "results"}`."""
        params: dict[str, Any] = {"image": image, **({"node": nodes} if nodes else {})}
        return self._json("GET", f"{API}/images/state", params=params)

    def image_action(self, action: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST /api/v1/images/{pull|remove|gc} → `{"image", "results": [per node]}`."""
        return self._json("POST", f"{API}/images/{action}", json=body, timeout=IMAGE_TIMEOUT)

    def import_image(self, path: Path, params: dict[str, Any]) -> dict[str, Any]:
        """POST /api/v1/images/import?name=&format=&node=|allNodes= with the file, streamed."""
        with path.open("rb") as body:
            return self._json("POST", f"{API}/images/import", params=params, content=body,
                              headers={"Content-Type": "application/octet-stream"},
                              timeout=IMAGE_TIMEOUT)

    # -- plumbing --------------------------------------------------------------------

    def _json(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        response = self._request(method, path, **kwargs)
        try:
            return response.json()
        except ValueError as exc:
            raise ConnectionLost(self.url, f"the reply to {method} {path} is not JSON") from exc

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        with self._translate_errors():
            response = self._http.request(method, path, **kwargs)
        if response.is_error:
            raise error_from_response(response)
        return response

    @contextmanager
    def _translate_errors(self) -> Iterator[None]:
        try:
            yield
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol) as exc:
            raise ServerUnreachable(self.url) from exc
        except httpx.TransportError as exc:
            raise ConnectionLost(self.url, str(exc) or type(exc).__name__) from exc
