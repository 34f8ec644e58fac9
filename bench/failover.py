"""Leader failover on PostgreSQL (docs/ha.md): time from the leader's kill -9 to the first
controller cycle of the new leader, over N trials, beside a cold restart in the same run.

Each trial makes a fresh database on a throw-away PostgreSQL server (tests/pgserver.py) and
a fresh data dir, and runs one of, interleaved:

- failover: two `gpuyard up --db-url` on it (the local engine, one data dir: the follower is
  on the same machine); a job runs in a real container; the leader is killed -9; measured:
  kill → the follower says it leads (GET /api/v1/leader) and kill → its first controller
  cycle (`gpuyard_controller_cycle_seconds_count` of its /metrics goes above 0), and the
  follower's CPU seconds over that span (/proc: the takeover's own cost);
- restart: one server, killed -9, and a new one started at once on the same database: the
  same two times (what one supervised server costs without a follower).

Both then check the job was adopted: it ends SUCCEEDED with one task row. The lease's time to
live is the default (4 s): a new leader waits for the old heartbeat to be that old.

It also measures how soon a submission to a follower starts its task, beside one to the
leader (submit → RUNNING, the follower's wake-up is a PostgreSQL NOTIFY).

Usage: .venv/bin/python bench/failover.py [--trials 5] [--wake-jobs 10]
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
from pathlib import Path

import httpx
from job_latency import free_port

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from pgserver import PgServer  # noqa: E402
from tasknetworks import nodes_under, random_subnets, remove_node_network  # noqa: E402

JOB = (
    "name: adopted\ntaskRoles:\n  main:\n    cpuNumber: 0.1\n    memoryMB: 64\n"
    "    command: sleep {s}\n"
)
YAML = {"Content-Type": "application/yaml"}
TICK = 0.02


class Up:
    """One `gpuyard up` process."""

    def __init__(self, data: Path, db_url: str) -> None:
        self.port = free_port()
        args = [sys.executable, "-m", "gpuyard", "up", "--port", str(self.port)]
        args += ["--data-dir", str(data), "--fake-gpus", "4xA100-80GB", "--db-url", db_url]
        args += ["--storage-root", str(data.parent / "storage")]
        self.proc = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=30)
        for _ in range(1200):
            try:
                if self.http.get("/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        else:
            raise SystemExit("server did not start")
        token = (data / "admin-token").read_text().strip()
        self.http.headers["Authorization"] = f"Bearer {token}"

    def role(self) -> str:
        return self.http.get("/api/v1/leader").json()["role"]

    def cycles(self) -> float:
        for line in self.http.get("/metrics").text.splitlines():
            if line.startswith("gpuyard_controller_cycle_seconds_count"):
                return float(line.split()[-1])
        return 0.0

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def submit(self, seconds: float) -> str:
        r = self.http.post("/api/v1/jobs", content=JOB.format(s=seconds), headers=YAML)
        r.raise_for_status()
        return r.json()["id"]

    def wait(self, job: str, states: set[str], timeout: float = 120) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.http.get(f"/api/v1/jobs/{job}").json()
            if got["state"] in states:
                return got
            time.sleep(TICK)
        raise SystemExit(f"job {job} not {states} in {timeout} s")

    def kill9(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.http.close()


def until(check, timeout: float = 120) -> float:
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        if check():
            return time.monotonic()
        time.sleep(TICK)
    raise SystemExit("timed out")


def trial(pg: PgServer, follower: bool) -> tuple[float, float, float]:
    """(kill → leads, kill → first cycle, the new leader's CPU seconds over it)."""
    url = pg.empty_database()
    with tempfile.TemporaryDirectory(prefix="gpuyard-bench-failover-") as tmp:
        data = Path(tmp) / "data"
        servers = [Up(data, url)]
        try:
            if follower:
                servers.append(Up(data, url))
            job = servers[0].submit(20)
            servers[0].wait(job, {"RUNNING"})
            servers[0].kill9()
            killed = time.monotonic()
            if not follower:
                servers.append(Up(data, url))
            new = servers[-1]
            cpu0 = new.cpu_s() if follower else 0.0  # a restart: its whole life
            led = until(lambda: new.role() == "leader")
            cycled = until(lambda: new.cycles() > 0)
            cpu = new.cpu_s() - cpu0
            done = new.wait(job, {"SUCCEEDED", "FAILED", "STOPPED"})
            if done["state"] != "SUCCEEDED" or len(done["tasks"]) != 1:
                raise SystemExit(f"the job was not adopted: {done['state']}, {done['tasks']}")
            return led - killed, cycled - killed, cpu
        finally:
            for s in servers:
                s.stop()
            pg.drop(url)
            for tag in nodes_under(Path(tmp)):
                remove_node_network(tag)


def wake_latency(pg: PgServer, jobs: int) -> tuple[list[float], list[float]]:
    """submit → RUNNING, each job alone: (to the leader, to the follower), interleaved."""
    url = pg.empty_database()
    with tempfile.TemporaryDirectory(prefix="gpuyard-bench-wake-") as tmp:
        data = Path(tmp) / "data"
        leader = Up(data, url)
        follower = Up(data, url)
        got: tuple[list[float], list[float]] = ([], [])
        try:
            for _ in range(jobs):
                for i, server in enumerate((leader, follower)):
                    t0 = time.monotonic()
                    job = server.submit(0.1)
                    server.wait(job, {"RUNNING", "SUCCEEDED"})
                    got[i].append(time.monotonic() - t0)
                    server.wait(job, {"SUCCEEDED"})
            return got
        finally:
            follower.stop()
            leader.stop()
            pg.drop(url)
            for tag in nodes_under(Path(tmp)):
                remove_node_network(tag)


def stats(xs: list[float]) -> str:
    each = ", ".join(f"{x:.2f}" for x in xs)
    return f"median {statistics.median(xs):6.2f}  max {max(xs):6.2f}  ({each})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--wake-jobs", type=int, default=10)
    args = ap.parse_args()
    os.environ["GPUYARD_TASK_SUBNET"] = random_subnets()[0]  # not another server's
    pg = PgServer.start()
    results: dict[str, list[tuple[float, float, float]]] = {"failover": [], "restart": []}
    try:
        for _ in range(args.trials):
            results["failover"].append(trial(pg, follower=True))
            results["restart"].append(trial(pg, follower=False))
        wake = wake_latency(pg, args.wake_jobs) if args.wake_jobs else ([], [])
    finally:
        pg.stop()
    print(
        f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"load {os.getloadavg()[0]:.1f}"
    )
    print(f"{args.trials} trials each, interleaved; seconds from the leader's kill -9")
    for name, got in results.items():
        print(f"{name:9s} leads       {stats([g[0] for g in got])}")
        print(f"{name:9s} first cycle {stats([g[1] for g in got])}")
        print(f"{name:9s} CPU s       {stats([g[2] for g in got])}")
    ratio = statistics.median(g[1] for g in results["failover"]) / statistics.median(
        g[1] for g in results["restart"]
    )
    print(f"failover / restart, first cycle (medians): {ratio:.2f}x")
    if wake[0]:
        print(f"submit → RUNNING via the leader   {stats(wake[0])}")
        print(f"submit → RUNNING via the follower {stats(wake[1])}")


if __name__ == "__main__":
    main()
