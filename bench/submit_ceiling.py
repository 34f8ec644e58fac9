"""What bounds submissions per second over HTTP on this machine: the request itself.

Issue 17's target is 500 submissions/s from one client and 1,000 from 8. A submission
cannot be faster than a request that does nothing, so one real `gpuyard up` (SQLite, 4 fake
GPUs) is measured, in interleaved rounds, on three requests, from one client (one after
another) and from 8 (threads, each its own connection):
  1. GET /healthz: no token, no database: FastAPI + uvicorn + the client alone;
  2. GET /api/v1/jobs/{id}: the token checked, one row read and rendered;
  3. POST /api/v1/jobs: a job submitted (parsed, checked, stored; it stays queued).
The client is Python (httpx) on the same 2 cores: its own cost is in every row, as it is in
`gpuyard submit`'s.

Usage: .venv/bin/python bench/submit_ceiling.py [--requests 500] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from db_submit import QUEUED_FOREVER, start, stop

CLIENTS = 8
YAML = {"Content-Type": "application/yaml"}


def rate(call: Callable[[httpx.Client], httpx.Response], base: str, token: str, n: int,
         clients: int) -> float:  # fmt: skip
    """Requests per second: N in all, from `clients` clients at once."""

    def one_client(count: int) -> None:
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=base, headers=headers, timeout=60) as http:
            call(http).raise_for_status()  # the connection made before the clock
            for _ in range(count):
                call(http).raise_for_status()

    per = n // clients
    t0 = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(one_client, [per] * clients))
    return per * clients / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    print(f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
    got: dict[tuple[str, int], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="gpuyard-bench-ceiling-") as tmp:
        proc, base, token = start(Path(tmp), None)
        try:
            with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}) as h:
                job_id = h.post("/api/v1/jobs", content=QUEUED_FOREVER, headers=YAML).json()["id"]
            calls: dict[str, Callable[[httpx.Client], httpx.Response]] = {
                "GET /healthz": lambda http: http.get("/healthz"),
                "GET a job": lambda http: http.get(f"/api/v1/jobs/{job_id}"),
                "POST a job": lambda http: http.post(
                    "/api/v1/jobs", content=QUEUED_FOREVER, headers=YAML
                ),
            }
            for _ in range(args.rounds):
                for name, call in calls.items():
                    for clients in (1, CLIENTS):
                        got.setdefault((name, clients), []).append(
                            rate(call, base, token, args.requests, clients)
                        )
        finally:
            stop(proc)
    print(f"{args.requests} requests per measure, median of {args.rounds} interleaved rounds")
    ceiling = {c: statistics.median(got[("GET /healthz", c)]) for c in (1, CLIENTS)}
    for (name, clients), rates in got.items():
        median = statistics.median(rates)
        share = median / ceiling[clients]
        print(f"{name:<14} {clients} client(s) {median:7.1f}/s  "
              f"({share:.2f}× /healthz)  {[round(r) for r in rates]}")  # fmt: skip


if __name__ == "__main__":
    main()
