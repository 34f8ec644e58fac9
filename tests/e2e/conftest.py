"""End-to-end fixtures: the real `gpuyard up` server in a subprocess on a free port.

The server makes its platform admin on first start; `Server.http` sends the admin's token
(read from `<data dir>/admin-token`). The default tenant's storage root is `Server.storage`
(`<test tmp dir>/storage`, made by the server on first start, owned by the tenant's uid, 0700),
so jobs may use dirs under it as dataDir and outputDir.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

FAKE_GPUS = "4xA100-80GB"
TERMINAL = {"SUCCEEDED", "FAILED", "STOPPED"}


def fetch_when_served(url: str, timeout: float = 30) -> bytes:
    """GET `url` once the app behind it listens: a task's server (through a port-forward or a
    service) may start after its task is RUNNING, slowly on a loaded machine, and a tunnel to
    a port nobody listens on yet is reset. Any other answer or error is the caller's."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                return r.read()
        except (ConnectionError, urllib.error.URLError) as e:
            if isinstance(e, urllib.error.HTTPError) or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A running gpuyard server; `kill9` and `start` let a test restart it on the same data."""

    def __init__(self, data_dir: Path, log_path: Path, *extra: str) -> None:
        self.data_dir = data_dir
        self.storage = data_dir.parent / "storage"  # the default tenant's storage root
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.extra = extra
        self.proc: subprocess.Popen[bytes] | None = None
        self.token = ""
        self.http = httpx.Client(base_url=self.url, timeout=10)

    def start(self) -> None:
        args = [
            sys.executable,
            "-m",
            "gpuyard",
            "up",
            "--port",
            str(self.port),
            "--data-dir",
            str(self.data_dir),
            "--fake-gpus",
            FAKE_GPUS,
            "--stop-grace",
            "2",
            "--storage-root",
            str(self.storage),
            *self.extra,
        ]
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child
        self.proc = subprocess.Popen(
            args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.log_path.read_text()[-3000:]}")
            try:
                if self.http.get("/healthz").status_code == 200:
                    self.login()
                    return
            except httpx.TransportError:
                time.sleep(0.1)
        raise RuntimeError("server did not become healthy in 30 s")

    def login(self) -> None:
        """Use the admin token the server wrote on its first start."""
        self.token = (self.data_dir / "admin-token").read_text().strip()
        self.http.headers["Authorization"] = f"Bearer {self.token}"

    def as_user(self, token: str) -> httpx.Client:
        """A client of this server that sends another user's token."""
        return httpx.Client(
            base_url=self.url, timeout=10, headers={"Authorization": f"Bearer {token}"}
        )

    def kill9(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def cancel_all(self, timeout: float = 20) -> None:
        """Cancel every job still alive: tasks outlive the server by design, so a test that
        failed half-way would otherwise leave its containers running after it."""
        try:
            jobs = self.http.get("/api/v1/jobs", params={"limit": 1000}).json()["jobs"]
            alive = [j["id"] for j in jobs if j["state"] not in TERMINAL]
            for job_id in alive:
                self.http.post(f"/api/v1/jobs/{job_id}/cancel")
            for job_id in alive:
                self.wait(job_id, timeout=timeout)
        except (httpx.HTTPError, AssertionError, KeyError):
            pass  # best effort: the server may be the thing that failed

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.cancel_all()
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.http.close()

    # -- API helpers --
    def submit(self, spec: str) -> str:
        r = self.http.post(
            "/api/v1/jobs", content=spec, headers={"Content-Type": "application/yaml"}
        )
        assert r.status_code == 201, r.text
        return r.json()["id"]

    def job(self, job_id: str) -> dict:
        r = self.http.get(f"/api/v1/jobs/{job_id}")
        assert r.status_code == 200, r.text
        return r.json()

    def wait(self, job_id: str, states: set[str] = TERMINAL, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job = self.job(job_id)
            if job["state"] in states:
                return job
            time.sleep(0.2)
        raise AssertionError(f"job {job_id} not in {states} after {timeout}s: {self.job(job_id)}")

    def logs(self, job_id: str, task: str | None = None, attempt: int | None = None) -> str:
        params = {k: v for k, v in {"task": task, "attempt": attempt}.items() if v is not None}
        r = self.http.get(f"/api/v1/jobs/{job_id}/logs", params=params)
        assert r.status_code == 200, r.text
        return r.text


@pytest.fixture
def make_server(tmp_path: Path) -> Iterator:
    servers: list[Server] = []

    def make(*extra: str) -> Server:
        srv = Server(tmp_path / "data", tmp_path / f"server-{len(servers)}.log", *extra)
        srv.start()
        servers.append(srv)
        return srv

    yield make
    for srv in servers:
        srv.stop()


@pytest.fixture
def server(make_server) -> Server:
    return make_server()
