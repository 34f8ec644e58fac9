"""Job latency: submit → task started, task exit → job recorded, and trivial jobs per second.

Starts a real `gpuyard up` on a free port with a fresh data dir, then:
  1. latency: N trivial jobs (`true`) one after another; from the server's own timestamps,
     submit → task started and task exit → job recorded (p50, p95);
  2. throughput: N trivial jobs submitted at once; jobs per second until all are recorded;
  3. baseline: N bare `<runtime> run` of the same command with the same container config
     (gpuyard's own OCI bundle), timed in this same run.

Usage: .venv/bin/python bench/job_latency.py [--jobs 100] [--runtime crun|runc]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import httpx

from gpuyard.runtime.executor import ContainerRuntime
from gpuyard.runtime.types import TaskLaunch

TRIVIAL = (
    "name: trivial\ntaskRoles:\n  main:\n    cpuNumber: 0.1\n    memoryMB: 64\n"
    "    command: 'true'\n"
)


def ts(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(data: Path, runtime: str | None) -> tuple[subprocess.Popen[bytes], httpx.Client]:
    port = free_port()
    args = [
        sys.executable,
        "-m",
        "gpuyard",
        "up",
        "--port",
        str(port),
        "--data-dir",
        str(data),
        "--fake-gpus",
        "4xA100-80GB",
    ]
    if runtime:
        args += ["--oci-runtime", runtime]
    proc = subprocess.Popen(
        args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)
    for _ in range(300):
        try:
            if http.get("/healthz").status_code == 200:
                token = (data / "admin-token").read_text().strip()  # made on first start
                http.headers["Authorization"] = f"Bearer {token}"
                return proc, http
        except httpx.TransportError:
            time.sleep(0.1)
    raise SystemExit("server did not start")


def submit(http: httpx.Client) -> str:
    r = http.post("/api/v1/jobs", content=TRIVIAL, headers={"Content-Type": "application/yaml"})
    r.raise_for_status()
    return r.json()["id"]


def wait_done(http: httpx.Client, job_id: str) -> dict:
    while True:
        job = http.get(f"/api/v1/jobs/{job_id}").json()
        if job["state"] in ("SUCCEEDED", "FAILED", "STOPPED"):
            return job
        time.sleep(0.02)


def latency(http: httpx.Client, n: int) -> tuple[list[float], list[float]]:
    to_start, to_record = [], []
    for _ in range(n):
        job = wait_done(http, submit(http))
        assert job["state"] == "SUCCEEDED", job
        task = job["tasks"][0]
        to_start.append(ts(task["startedAt"]) - ts(job["submittedAt"]))
        to_record.append(ts(job["finishedAt"]) - ts(task["finishedAt"]))
    return to_start, to_record


def throughput(http: httpx.Client, n: int) -> float:
    t0 = time.monotonic()
    ids = [submit(http) for _ in range(n)]
    for job_id in ids:
        wait_done(http, job_id)
    return n / (time.monotonic() - t0)


def baseline(runtime_name: str | None, n: int) -> tuple[str, list[float]]:
    """Bare `<runtime> run` of the same command, with gpuyard's own config for the task."""
    root = Path(tempfile.mkdtemp(prefix="gpuyard-bench-"))
    rt = ContainerRuntime(root, runtime_name)
    times = []
    for i in range(n):
        launch = TaskLaunch(
            key=f"bare-{i}",
            job_id="bare",
            job_name="bare",
            role="main",
            index=0,
            attempt=1,
            command="true",
            cpu=0.1,
            memory_mb=64,
        )
        bundle = root / f"bundle-{i}"
        (bundle / "work").mkdir(parents=True)
        config = rt.container_config(launch, bundle / "work")
        (bundle / "config.json").write_text(json.dumps(config))
        t0 = time.monotonic()
        subprocess.run(
            rt.rt.command("run", "--bundle", str(bundle), launch.key),
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        times.append(time.monotonic() - t0)
    return rt.name, times


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=100)
    ap.add_argument("--runtime", default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpuyard-bench-") as tmp:
        proc, http = start_server(Path(tmp) / "data", args.runtime)
        try:
            to_start, to_record = latency(http, args.jobs)
            jobs_per_s = throughput(http, args.jobs)
        finally:
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(30)
    rt_name, bare = baseline(args.runtime, args.jobs)
    print(
        f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Linux {platform.release()}, Python {platform.python_version()}, runtime {rt_name}"
    )
    print(f"{'measure (N=' + str(args.jobs) + ')':<42}{'p50':>9}{'p95':>9}")
    for name, xs in [
        ("submit → task started (s)", to_start),
        ("task exit → job recorded (s)", to_record),
        (f"baseline: bare `{rt_name} run true` (s)", bare),
    ]:
        print(f"{name:<42}{pct(xs, 50):>9.3f}{pct(xs, 95):>9.3f}")
    print(f"{'trivial jobs per second (burst of N)':<42}{jobs_per_s:>9.2f}")
    print(f"{'bare runs per second (sequential)':<42}{1 / statistics.mean(bare):>9.2f}")
    print(f"ratio submit→started p50 / bare run p50: {pct(to_start, 50) / pct(bare, 50):.2f}")


if __name__ == "__main__":
    main()
