"""Submissions per second through the API, SQLite against PostgreSQL, in interleaved rounds.

Each round starts a real `gpuyard up` (4 fake GPUs) on a fresh data dir: on SQLite in that
dir, on PostgreSQL on a fresh database of a throw-away server (tests/pgserver.py: initdb and
pg_ctl in a temporary dir, a Unix socket, as the `postgres` user when run as root). The jobs
ask for 8 GPUs, so they stay queued (no container starts) and the controller computes their
pending reasons each cycle, as with held jobs. Measured: N submissions from one client, one
after another, and N from 8 clients at once (threads).

The test server is tuned for tests (fsync and synchronous_commit off), as SQLite here runs
with synchronous=NORMAL: compare the two as configured, not as durable.

Usage: .venv/bin/python bench/db_submit.py [--jobs 300] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from job_latency import free_port

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from pgserver import PgServer  # noqa: E402

QUEUED_FOREVER = (
    "name: queued\ntaskRoles:\n  main:\n    gpuNumber: 8\n    cpuNumber: 0.1\n"
    "    memoryMB: 64\n    command: 'true'\n"
)
CLIENTS = 8


def start(data: Path, db_url: str | None) -> tuple[subprocess.Popen[bytes], str, str]:
    """`gpuyard up` on a free port; (process, base URL, admin token) once it answers."""
    port = free_port()
    args = [sys.executable, "-m", "gpuyard", "up", "--port", str(port), "--data-dir", str(data)]
    args += ["--fake-gpus", "4xA100-80GB", *(["--db-url", db_url] if db_url else [])]
    proc = subprocess.Popen(
        args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx.get(f"{base}/healthz").status_code == 200:
                return proc, base, (data / "admin-token").read_text().strip()
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    stop(proc)
    raise SystemExit("server did not start")


def stop(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def submit_many(base: str, token: str, n: int) -> None:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/yaml"}
    with httpx.Client(base_url=base, headers=headers, timeout=60) as http:
        for _ in range(n):
            http.post("/api/v1/jobs", content=QUEUED_FOREVER).raise_for_status()


def rates(base: str, token: str, n: int) -> tuple[float, float]:
    """(one client, 8 clients) submissions per second, N each."""
    t0 = time.monotonic()
    submit_many(base, token, n)
    one = n / (time.monotonic() - t0)
    t0 = time.monotonic()
    with ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(lambda _: submit_many(base, token, n // CLIENTS), range(CLIENTS)))
    many = (n // CLIENTS * CLIENTS) / (time.monotonic() - t0)
    return one, many


def round_on(db_url: str | None, n: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="gpuyard-bench-db-") as tmp:
        proc, base, token = start(Path(tmp), db_url)
        try:
            return rates(base, token, n)
        finally:
            stop(proc)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    pg = PgServer.start()
    results: dict[str, list[tuple[float, float]]] = {"sqlite": [], "postgresql": []}
    try:
        for _ in range(args.rounds):
            results["sqlite"].append(round_on(None, args.jobs))
            url = pg.empty_database()
            results["postgresql"].append(round_on(url, args.jobs))
            pg.drop(url)
    finally:
        pg.stop()
    print(f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    print(f"N = {args.jobs} per measure, {args.rounds} interleaved rounds; median of rounds")
    for name, got in results.items():
        one = statistics.median(r[0] for r in got)
        many = statistics.median(r[1] for r in got)
        print(f"{name:10s}  1 client {one:7.1f}/s   {CLIENTS} clients {many:7.1f}/s   {got}")


if __name__ == "__main__":
    main()
