"""Job arrays and batches through the API: a 1,000-job array in one request (goal ≤ 1 s),
and submissions per second by batch (`POST /api/v1/jobs:batch`) against one at a time, in
interleaved rounds on the same machine.

Each measurement starts a real `gpuyard up` (4 fake GPUs, SQLite) on a fresh data dir; the
jobs ask for 8 GPUs, so they stay queued (no container starts) and the controller computes
their pending reasons each cycle meanwhile, as it would for a queue that waits. Measured
per request: wall time at the client and the server process's CPU time (user + system,
from /proc), so a loaded machine shows as wall time above CPU time.

Usage: .venv/bin/python bench/array_submit.py [--size 1000] [--jobs 300] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from db_submit import start, stop

QUEUED = {
    "name": "queued",
    "taskRoles": {"main": {"gpuNumber": 8, "cpuNumber": 0.1, "memoryMB": 64, "command": "true"}},
}
TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def measured(pid: int, work: Callable[[], None]) -> tuple[float, float]:
    """(wall s, server CPU s) of `work`."""
    cpu, wall = cpu_s(pid), time.perf_counter()
    work()
    return time.perf_counter() - wall, cpu_s(pid) - cpu


def on_server(fn: Callable[[httpx.Client, int], tuple[float, float]]) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="gpuyard-bench-") as tmp:
        proc, base, token = start(Path(tmp) / "data", None)
        try:
            headers = {"Authorization": f"Bearer {token}"}
            with httpx.Client(base_url=base, headers=headers, timeout=120) as http:
                return fn(http, proc.pid)
        finally:
            stop(proc)


def array_of(size: int) -> Callable[[httpx.Client, int], tuple[float, float]]:
    def run(http: httpx.Client, pid: int) -> tuple[float, float]:
        doc = {**QUEUED, "array": f"0-{size - 1}"}
        out: list[httpx.Response] = []
        cost = measured(pid, lambda: out.append(http.post("/api/v1/jobs", json=doc)))
        assert out[0].status_code == 201 and len(out[0].json()["children"]) == size, out[0].text
        return cost

    return run


def batch_of(n: int) -> Callable[[httpx.Client, int], tuple[float, float]]:
    def run(http: httpx.Client, pid: int) -> tuple[float, float]:
        out: list[httpx.Response] = []
        body = {"jobs": [QUEUED] * n}
        cost = measured(pid, lambda: out.append(http.post("/api/v1/jobs:batch", json=body)))
        assert out[0].status_code == 201 and len(out[0].json()["jobs"]) == n, out[0].text
        return cost

    return run


def singles_of(n: int) -> Callable[[httpx.Client, int], tuple[float, float]]:
    def run(http: httpx.Client, pid: int) -> tuple[float, float]:
        def work() -> None:
            for _ in range(n):
                http.post("/api/v1/jobs", json=QUEUED).raise_for_status()

        return measured(pid, work)

    return run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"machine: {platform.node()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    arrays, batches, singles = [], [], []
    for r in range(args.rounds):
        arrays.append(on_server(array_of(args.size)))
        batches.append(on_server(batch_of(args.jobs)))
        singles.append(on_server(singles_of(args.jobs)))
        print(
            f"round {r + 1}: array {arrays[-1][0]:.3f} s, batch {batches[-1][0]:.3f} s, "
            f"singles {singles[-1][0]:.3f} s (load {os.getloadavg()[0]:.1f})"
        )
    med = {
        k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
        for k, v in (("array", arrays), ("batch", batches), ("singles", singles))
    }
    print(
        f"{args.size}-job array in one request: {med['array'][0]:.3f} s wall, "
        f"{med['array'][1]:.3f} s server CPU (median of {args.rounds}; goal ≤ 1 s)"
    )
    batch_rate, single_rate = args.jobs / med["batch"][0], args.jobs / med["singles"][0]
    print(
        f"{args.jobs} jobs by batch: {batch_rate:.0f}/s wall "
        f"({args.jobs / max(med['batch'][1], 1e-9):.0f}/s per server CPU-s)"
    )
    print(
        f"{args.jobs} jobs one by one: {single_rate:.0f}/s wall "
        f"({args.jobs / max(med['singles'][1], 1e-9):.0f}/s per server CPU-s)"
    )
    print(
        f"batch / single: {batch_rate / single_rate:.1f}x wall, "
        f"{med['singles'][1] / max(med['batch'][1], 1e-9):.1f}x server CPU"
    )


if __name__ == "__main__":
    main()
