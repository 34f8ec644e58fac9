"""What bounds trivial containerized jobs per second on this machine: the CPU a job costs.

Issue 17's target is 100 trivial jobs/s end to end (500 at once, 32 slots). On a machine of
C cores no platform can run more jobs per second than C ÷ (CPU seconds one job costs), and
the least a job can cost is what `crun run` of its container costs. Measured in one run,
with the whole machine's busy CPU time (/proc/stat: user, nice, system, irq, softirq, steal
of every core) around each:
  1. bare: N `crun run true` of gpuyard's own OCI config for a task (a network namespace of
     its own, the seccomp filter, cgroup limits), K at a time, no platform at all;
  2. gpuyard: a real `gpuyard up` (SQLite, the local engine, crun) given one job array of N
     trivial jobs (`true`, 1/16 CPU each: 32 fit the 2-CPU node at once), from the POST
     until every child is recorded ended.
For each: jobs per second (wall), CPU seconds per job, and the ceiling C ÷ that.

Usage: .venv/bin/python bench/trivial_ceiling.py [--jobs 500] [--parallel 32]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from db_submit import start, stop

from gpuyard.runtime.executor import ContainerRuntime
from gpuyard.runtime.types import TaskLaunch

TICK = os.sysconf("SC_CLK_TCK")
TRIVIAL = {
    "name": "trivial",
    "taskRoles": {"main": {"cpuNumber": 0.0625, "memoryMB": 32, "command": "true"}},
}


def busy_s() -> float:
    """The machine's busy CPU seconds so far, all cores."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / TICK


def bare(n: int, parallel: int) -> tuple[float, float]:
    """(wall s, busy CPU s) of N `crun run` of gpuyard's config, `parallel` at a time."""
    root = Path(tempfile.mkdtemp(prefix="gpuyard-bench-ceiling-"))
    rt = ContainerRuntime(root, None)
    bundles = []
    for i in range(n):
        launch = TaskLaunch(key=f"bare-{i}", job_id="bare", job_name="bare", role="main",
                            index=0, attempt=1, command="true", cpu=0.0625, memory_mb=32)
        bundle = root / f"bundle-{i}"
        (bundle / "work").mkdir(parents=True)
        config = rt.container_config(launch, bundle / "work")
        (bundle / "config.json").write_text(json.dumps(config))
        bundles.append((bundle, launch.key))

    def run(item: tuple[Path, str]) -> None:
        bundle, key = item
        subprocess.run(rt.rt.command("run", "--bundle", str(bundle), key), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip

    cpu, wall = busy_s(), time.perf_counter()
    with ThreadPoolExecutor(parallel) as pool:
        list(pool.map(run, bundles))
    return time.perf_counter() - wall, busy_s() - cpu


def platform_run(n: int) -> tuple[float, float, dict[str, int]]:
    """(wall s, busy CPU s, children by state) of one array of N trivial jobs, end to end."""
    with tempfile.TemporaryDirectory(prefix="gpuyard-bench-ceiling-") as tmp:
        proc, base, token = start(Path(tmp) / "data", None)
        try:
            headers = {"Authorization": f"Bearer {token}"}
            with httpx.Client(base_url=base, headers=headers, timeout=120) as http:
                time.sleep(2)  # the server's start-up is not the jobs'
                cpu, wall = busy_s(), time.perf_counter()
                r = http.post("/api/v1/jobs", json={**TRIVIAL, "array": f"0-{n - 1}"})
                r.raise_for_status()
                array_id = r.json()["id"]
                while True:
                    counts = http.get(f"/api/v1/arrays/{array_id}").json()["counts"]
                    done = sum(counts.get(s, 0) for s in ("SUCCEEDED", "FAILED", "STOPPED"))
                    if done >= n:
                        break
                    time.sleep(0.05)
                return time.perf_counter() - wall, busy_s() - cpu, counts
        finally:
            stop(proc)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=500)
    ap.add_argument("--parallel", type=int, default=32)
    args = ap.parse_args()
    cores = os.cpu_count() or 1
    print(f"{platform.machine()}, {cores} CPUs, Linux {platform.release()}, "
          f"Python {platform.python_version()}, load {os.getloadavg()[0]:.1f}")  # fmt: skip
    rows = []
    wall, cpu = bare(args.jobs, args.parallel)
    rows.append((f"bare crun run, {args.parallel} at a time", wall, cpu, ""))
    wall, cpu, counts = platform_run(args.jobs)
    rows.append(("gpuyard, one array, end to end", wall, cpu, json.dumps(counts)))
    for name, wall, cpu, note in rows:
        per_job = cpu / args.jobs
        print(f"{name:<34} {args.jobs / wall:7.1f} jobs/s  {per_job * 1000:6.1f} ms CPU/job  "
              f"ceiling {cores / per_job:6.1f} jobs/s {note}")  # fmt: skip


if __name__ == "__main__":
    main()
