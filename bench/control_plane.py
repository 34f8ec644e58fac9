"""The control plane under a deep queue: idle CPU, RSS and API latency with N jobs queued.

Two real `gpuyard up` (SQLite, 4 fake GPUs) in the same run: a baseline with nothing queued,
and one with N queued jobs that never fit (8 GPUs each), put in the store directly (the API
would take minutes to take 10k). Each server is measured the same way:
  1. idle CPU: the server process's CPU time (user + system, all threads) over a quiet
     window, as a percentage of one core, and the controller cycles in it (`/metrics`);
  2. RSS: the server's resident memory after the window;
  3. API latency, one client: GET of a random job, a page of 100 jobs, a queued
     submission (p50 / p99).

Issue 17's targets: idle CPU with 10k queued ≤ 2 %, p99 of each call ≤ 50 ms, RSS ≤ 150 MB.

With `--running N`, both servers first run N jobs that sleep (real containers, 1/200 of a
CPU each) and wait for them to be running, as the issue's target asks (200 running).

Usage: .venv/bin/python bench/control_plane.py [--queued 10000] [--window 20] [--calls 200]
       [--running 200]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import yaml
from db_submit import QUEUED_FOREVER, start, stop

from gpuyard.spec import parse_job_spec
from gpuyard.store import NewJob, open_store

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime


def rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+)", status)[1]) / 1024  # type: ignore[index]


def cycles(http: httpx.Client) -> float:
    text = http.get("/metrics").text
    m = re.search(r"^gpuyard_controller_cycle_seconds_count(?:\{[^}]*\})? (\S+)$", text, re.M)
    return float(m[1]) if m else float("nan")


def seed(data: Path, n: int) -> None:
    """N queued jobs of the default tenant, owned by the admin, straight into the store."""
    spec = parse_job_spec(yaml.safe_load(QUEUED_FOREVER))
    store = open_store(data)
    try:
        for _ in range(n):
            store.jobs.submit(NewJob(spec.name, spec.tenant, 0, 0, spec.to_document(), "admin"))
    finally:
        store.close()


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def timed(call: Callable[[], httpx.Response], n: int) -> tuple[float, float]:
    """p50 and p99 of N calls, in milliseconds."""
    took = []
    for _ in range(n):
        t0 = time.perf_counter()
        call().raise_for_status()
        took.append(time.perf_counter() - t0)
    return pct(took, 50) * 1000, pct(took, 99) * 1000


@dataclass
class Measured:
    queued: int
    seed_s: float
    idle_cpu_pct: float
    cycles_per_s: float
    rss_mb: float
    get_ms: tuple[float, float]
    list100_ms: tuple[float, float]
    submit_ms: tuple[float, float]

    def line(self) -> str:
        return (
            f"queued {self.queued:>6}: idle CPU {self.idle_cpu_pct:5.1f} % "
            f"({self.cycles_per_s:.2f} cycles/s), RSS {self.rss_mb:6.1f} MB, "
            f"get p50/p99 {self.get_ms[0]:.1f}/{self.get_ms[1]:.1f} ms, "
            f"list100 {self.list100_ms[0]:.1f}/{self.list100_ms[1]:.1f} ms, "
            f"submit {self.submit_ms[0]:.1f}/{self.submit_ms[1]:.1f} ms "
            f"(seeded in {self.seed_s:.0f} s)"
        )


SLEEPER = {
    "name": "sleeper",
    "taskRoles": {"main": {"cpuNumber": 0.005, "memoryMB": 16, "command": "sleep 3600"}},
}


def run_sleepers(http: httpx.Client, n: int) -> str:
    """N sleeping jobs (one array), waited for until all run; the array's id."""
    r = http.post("/api/v1/jobs", json={**SLEEPER, "array": f"0-{n - 1}"})
    r.raise_for_status()
    array_id = r.json()["id"]
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        counts = http.get(f"/api/v1/arrays/{array_id}").json()["counts"]
        if counts.get("RUNNING", 0) >= n:
            return array_id
        if any(counts.get(s) for s in ("FAILED", "STOPPED", "SUCCEEDED")):
            raise SystemExit(f"sleepers ended: {counts}")
        time.sleep(0.5)
    raise SystemExit("sleepers did not all run in 10 min")


def stop_sleepers(http: httpx.Client, array_id: str) -> None:
    """Cancel them and wait until none runs (their containers outlive a stopped server)."""
    http.post(f"/api/v1/arrays/{array_id}/cancel").raise_for_status()
    for _ in range(600):
        counts = http.get(f"/api/v1/arrays/{array_id}").json()["counts"]
        if not counts.get("RUNNING") and not counts.get("SCHEDULED"):
            return
        time.sleep(0.5)


def measure(queued: int, window_s: float, calls: int, running: int = 0) -> Measured:
    with tempfile.TemporaryDirectory(prefix="gpuyard-bench-cp-") as tmp:
        data = Path(tmp)
        proc, base, token = start(data, None)
        try:
            t0 = time.monotonic()
            seed(data, queued)
            seeded_s = time.monotonic() - t0
            http = httpx.Client(base_url=base, timeout=60)
            http.headers["Authorization"] = f"Bearer {token}"
            sleepers = run_sleepers(http, running) if running else None
            time.sleep(3)  # the first cycles over the new queue
            c0, k0 = cpu_s(proc.pid), cycles(http)
            time.sleep(window_s)
            idle = (cpu_s(proc.pid) - c0) / window_s * 100
            n_cycles = cycles(http) - k0
            headers = {"Content-Type": "application/yaml"}
            sub = timed(lambda: http.post("/api/v1/jobs", content=QUEUED_FOREVER,
                                          headers=headers), calls)
            listed = http.get("/api/v1/jobs", params={"limit": 100}).json()["jobs"]
            ids = [j["id"] for j in listed]
            got = timed(lambda: http.get(f"/api/v1/jobs/{random.choice(ids)}"), calls)
            page = timed(lambda: http.get("/api/v1/jobs", params={"limit": 100}), calls // 4)
            measured = Measured(queued, seeded_s, idle, n_cycles / window_s, rss_mb(proc.pid),
                                got, page, sub)  # fmt: skip
            if sleepers:
                stop_sleepers(http, sleepers)
            return measured
        finally:
            stop(proc)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--queued", type=int, default=10_000)
    ap.add_argument("--window", type=float, default=20.0)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--running", type=int, default=0)
    args = ap.parse_args()
    print(f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"{args.running} running")  # fmt: skip
    base = measure(0, args.window, args.calls, args.running)
    deep = measure(args.queued, args.window, args.calls, args.running)
    print(base.line())
    print(deep.line())
    print(
        f"deep / baseline: idle CPU {deep.idle_cpu_pct / max(base.idle_cpu_pct, 0.1):.1f}×, "
        f"RSS {deep.rss_mb / base.rss_mb:.2f}×, get p99 {deep.get_ms[1] / base.get_ms[1]:.1f}×, "
        f"list100 p99 {deep.list100_ms[1] / base.list100_ms[1]:.1f}×, "
        f"submit p99 {deep.submit_ms[1] / base.submit_ms[1]:.1f}×"
    )


if __name__ == "__main__":
    main()
