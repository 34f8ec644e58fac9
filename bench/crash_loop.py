"""Crash safety: kill -9 the server again and again during a burst of jobs; nothing is lost,
nothing runs twice, nothing is left behind.

Starts a real `gpuyard up` (fake GPUs, a fresh data dir, the default tenant's root under it),
submits a burst of jobs that each append one line per run to their own file in `/output`,
then `--restarts` times: waits a random 0.3-1.5 s, `kill -9`s the server and starts it again
on the same data dir and port. Then it waits for every job to end and reports:

- lost: jobs not SUCCEEDED;
- duplicated: runs of one job attempt's command more than once (lines in its file beyond
  its attempts), and jobs that needed more than one attempt;
- orphans once every job ended and the server released its tasks: containers crun/runc
  still knows, task cgroups under `/gpuyard`, mounts under the data dir, task dirs left; and
  once the server stopped, the node's network namespaces (`/run/netns/gpy-<node tag>-*`)
  and task network claims left (a stopped node with no task keeps none, spares included).

Usage: .venv/bin/python bench/crash_loop.py [--restarts 30] [--jobs 60] [--seed 0]
(`tests/security/test_crash_safety.py` runs a short version of the same loop.)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

from gpuyard.runtime.tasknet import node_tag

TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")
RUNTIME_ROOTS = (Path("/run/gpuyard/crun"), Path("/run/gpuyard/runc"))
CGROUP_ROOTS = tuple(Path("/sys/fs/cgroup") / c / "gpuyard"
                     for c in ("memory", "pids", "cpu", "devices", "unified", ""))
JOB = """name: crash-{i}
taskRoles:
  main:
    cpuNumber: 0.1
    memoryMB: 64
    command: echo run >> /output/$GPUYARD_JOB_ID; sleep {sleep}
outputDir: {out}
"""


@dataclass
class Report:
    restarts: int
    jobs: int
    seconds: float = 0.0
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    retried: list[str] = field(default_factory=list)
    orphan_containers: list[str] = field(default_factory=list)
    orphan_cgroups: list[str] = field(default_factory=list)
    orphan_mounts: list[str] = field(default_factory=list)
    orphan_task_dirs: list[str] = field(default_factory=list)
    orphan_netns: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.lost or self.duplicated or self.orphan_containers
                    or self.orphan_cgroups or self.orphan_mounts or self.orphan_task_dirs
                    or self.orphan_netns)


class Server:
    """`gpuyard up` in a subprocess, restartable on the same data dir and port."""

    def __init__(self, data: Path, storage: Path) -> None:
        self.data, self.storage = data, storage
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=30)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        args = [sys.executable, "-m", "gpuyard", "up", "--port", str(self.port),
                "--data-dir", str(self.data), "--fake-gpus", "4xA100-80GB",
                "--stop-grace", "1", "--storage-root", str(self.storage)]
        log = open(self.data.parent / "server.log", "ab")  # noqa: SIM115 - the child's
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the port may still be held for a moment
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
            if self._healthy(deadline):
                self.http.headers["Authorization"] = "Bearer " + (
                    self.data / "admin-token").read_text().strip()
                return
            time.sleep(0.2)
        raise RuntimeError("the server did not come back in 60 s")

    def _healthy(self, deadline: float) -> bool:
        assert self.proc is not None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                if self.http.get("/healthz").status_code == 200:
                    return True
            except httpx.TransportError:
                time.sleep(0.05)
        return False

    def kill9(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def jobs(self) -> list[dict]:
        r = self.http.get("/api/v1/jobs", params={"limit": 1000})
        r.raise_for_status()
        return r.json()["jobs"]


def submit_burst(server: Server, n: int, rng: random.Random) -> list[str]:
    ids = []
    for i in range(n):
        spec = JOB.format(i=i, sleep=round(rng.uniform(0.2, 2.0), 2),
                          out=server.storage / "out")
        r = server.http.post("/api/v1/jobs", content=spec,
                             headers={"Content-Type": "application/yaml"})
        r.raise_for_status()
        ids.append(r.json()["id"])
    return ids


def wait_all(server: Server, ids: list[str], timeout: float) -> dict[str, dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        jobs = {j["id"]: j for j in server.jobs() if j["id"] in ids}
        if len(jobs) == len(ids) and all(j["state"] in TERMINAL for j in jobs.values()):
            return jobs
        time.sleep(0.5)
    return {j["id"]: j for j in server.jobs() if j["id"] in ids}


def released(data: Path, timeout: float = 90) -> list[str]:
    """Task dirs still on the node, after waiting for the server to release them."""
    tasks = data / "node" / "tasks"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = sorted(p.name for p in tasks.iterdir()) if tasks.exists() else []
        if not left:
            return []
        time.sleep(0.5)
    return left


def orphans(report: Report, data: Path, ids: set[str]) -> None:
    """What is left of this run's tasks (keys `<job id>-a<attempt>-<role>-<index>`)."""
    report.orphan_task_dirs = released(data)
    ours = lambda name: name.split("-", 1)[0] in ids  # noqa: E731
    for root in RUNTIME_ROOTS:
        if root.exists():
            report.orphan_containers += [p.name for p in root.iterdir() if ours(p.name)]
    for root in CGROUP_ROOTS:
        if root.exists():
            report.orphan_cgroups += [f"{root}/{p.name}" for p in root.iterdir()
                                      if p.is_dir() and ours(p.name)]
    prefix = str(data.resolve()) + "/"
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4]
        if point.startswith(prefix) and "/tasks/" in point:
            report.orphan_mounts.append(point)


def orphan_networks(report: Report, data: Path) -> None:
    """The node's network namespaces and claims left once the server stopped."""
    prefix = f"gpy-{node_tag(data / 'node')}-"
    netns = Path("/run/netns")
    report.orphan_netns = sorted(n.name for n in netns.iterdir() if n.name.startswith(prefix)
                                 ) if netns.exists() else []
    claims = data / "node" / "net" / "claims"
    report.orphan_netns += sorted(f"claim {p.name}" for p in claims.glob("*.json"))


def judge(report: Report, jobs: dict[str, dict], ids: list[str], out: Path) -> None:
    for job_id in ids:
        job = jobs.get(job_id)
        if job is None or job["state"] != "SUCCEEDED":
            report.lost.append(f"{job_id}: {job and job['state']} {job and job.get('reason')}")
            continue
        runs = len((out / job_id).read_text().splitlines()) if (out / job_id).exists() else 0
        if runs > job["attempt"]:
            report.duplicated.append(f"{job_id}: {runs} runs in {job['attempt']} attempt(s)")
        if job["attempt"] > 1:
            report.retried.append(f"{job_id}: attempt {job['attempt']} ({job.get('reason')})")


def run(restarts: int, jobs: int, seed: int, workdir: Path) -> Report:
    rng = random.Random(seed)
    data, storage = workdir / "data", workdir / "storage"
    server = Server(data, storage)
    report = Report(restarts, jobs)
    began = time.monotonic()
    server.start()
    try:
        ids = submit_burst(server, jobs, rng)
        for _ in range(restarts):
            time.sleep(rng.uniform(0.3, 1.5))
            server.kill9()
            server.start()
        done = wait_all(server, ids, timeout=120 + 2 * jobs)
        judge(report, done, ids, storage / "out")
        orphans(report, data, set(ids))
    finally:
        server.stop()
    orphan_networks(report, data)
    report.seconds = round(time.monotonic() - began, 1)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--restarts", type=int, default=30)
    parser.add_argument("--jobs", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpuyard-crash-") as tmp:
        report = run(args.restarts, args.jobs, args.seed, Path(tmp))
    print(json.dumps({**asdict(report), "clean": report.clean}, indent=2))
    sys.exit(0 if report.clean else 1)


if __name__ == "__main__":
    main()
