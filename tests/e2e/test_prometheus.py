"""A real Prometheus (Debian's binary) scrapes the real `gpuyard up` every second; a gpuyard
metric is then read back through Prometheus' HTTP API (Prometheus sends the scrape token the
server made, `<data dir>/metrics-token`). A running container's cgroup usage and
the fake GPUs' allocation show on /metrics, with no DCGM readings for fake GPUs."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from e2e.conftest import free_port

pytestmark = [pytest.mark.e2e]

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
SLEEPER = """\
name: sleeper
taskRoles:
  main:
    cpuNumber: 0.5
    memoryMB: 256
    gpuNumber: 2
    command: "sleep 60"
"""


def prometheus_config(target_port: int, token_file: Path) -> str:
    """Scrape every second with the token the server made in its data dir."""
    return (
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: gpuyard\n    honor_labels: true\n"
        f"    authorization:\n      type: Bearer\n      credentials_file: {token_file}\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n"
    )


@contextmanager
def prometheus_on(port: int, token_file: Path, tmp_path: Path) -> Iterator[httpx.Client]:
    """A real Prometheus scraping the server on `port` every second; a client of its API."""
    if not Path(PROMETHEUS).exists():
        pytest.skip("no prometheus binary: `make system` installs Debian's prometheus")
    config = tmp_path / "prometheus.yml"
    config.write_text(prometheus_config(port, token_file))
    listen = free_port()
    log = open(tmp_path / "prometheus.log", "wb")  # noqa: SIM115 - owned by the child
    proc = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{listen}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    client = httpx.Client(base_url=f"http://127.0.0.1:{listen}", timeout=5)
    try:
        yield client
    finally:
        client.close()
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture
def prometheus(server, tmp_path: Path) -> Iterator[httpx.Client]:
    with prometheus_on(server.port, server.data_dir / "metrics-token", tmp_path) as client:
        yield client


def query(prom: httpx.Client, expr: str, timeout: float = 60) -> list[dict]:
    """The result of `expr` once it has one (Prometheus scraped gpuyard)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            r = prom.get("/api/v1/query", params={"query": expr})
            if r.status_code == 200 and r.json()["data"]["result"]:
                return r.json()["data"]["result"]
        except httpx.TransportError:
            pass  # not listening yet
        time.sleep(0.5)
    raise AssertionError(f"Prometheus has no {expr} after {timeout}s")


def test_prometheus_scrapes_gpuyard(server, prometheus):
    (up,) = query(prometheus, 'up{job="gpuyard"} == 1')
    assert up["metric"]["instance"] == f"127.0.0.1:{server.port}"
    gpus = query(prometheus, 'count(gpuyard_gpu_allocated{fake="true"})')
    assert gpus[0]["value"][1] == "4"
    jobs = query(prometheus, 'gpuyard_jobs{tenant="default", state="QUEUED"}')
    assert jobs[0]["value"][1] == "0"


def metrics_of(server) -> dict[str, list]:
    text = server.http.get("/metrics").text  # as the platform admin
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


@pytest.mark.container
def test_a_running_task_shows_its_cgroup_and_its_fake_gpus(server):
    job = server.submit(SLEEPER)
    server.wait(job, {"RUNNING"})
    deadline = time.monotonic() + 30
    while True:
        families = metrics_of(server)
        memory = [s for s in families["gpuyard_task_memory_bytes"] if s.labels["job"] == job]
        if memory or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    server.http.post(f"/api/v1/jobs/{job}/cancel")
    assert memory and memory[0].value > 0 and memory[0].labels["task"] == "main/0"
    held = [s for s in families["gpuyard_gpu_allocated"] if s.labels["job"] == job]
    assert len(held) == 2 and all(s.labels["fake"] == "true" for s in held)
    assert not [s for name, ss in families.items() if name.startswith("DCGM_") for s in ss]
