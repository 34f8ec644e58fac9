"""Scrape latency of `/metrics` on a 3-node Ray cluster: 3 nodes × 8 GPUs × 20 tasks (issue 20).

Starts a real 3-node Ray cluster on 127.0.0.2-4 whose nodes each load the fake NVML with 8 GPUs
of their own (tests/nvmlcluster.py: GPUs that look real, so every scrape asks every node's
agent for its NVML readings and its tasks' cgroups), a real `gpuyard up --engine ray://…` on it,
and 20 one-GPU jobs (`sleep`, real containers) spread over the nodes. Then, interleaved:

- N scrapes of `/metrics` with the scrape token (what Prometheus does), and
- N reads of `GET /api/v1/nodes` (the baseline: a read of the same nodes, answered from the
  engine's cached inventories with no call to a node),

and prints p50/p95/p99 wall latency of each, their ratio, the server's CPU time per request
(from /proc), the nodes' CPU per scrape (every process under the three raylets, agents
included, less what they use in as long a quiet spell: the 1 s status polls) and what one
scrape holds (DCGM series, task series, nodes that answered).

Needs root (mknod, containers), gcc, crun. Usage:
    .venv/bin/python bench/metrics_scrape.py [--scrapes 300] [--tasks 20]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from job_latency import free_port, pct
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from fakenvml import build_fake_nvml  # noqa: E402
from nvmlcluster import NvmlRayCluster  # noqa: E402
from raycluster import descendants  # noqa: E402
from tasknetworks import nodes_under, random_subnets, remove_node_network  # noqa: E402

GPUS_PER_NODE = 8
UTIL = {"ray-a": 60, "ray-b": 30, "ray-c": 90}
SLEEPER = (
    "name: s{i}\ntaskRoles:\n  main:\n    cpuNumber: 0.05\n    memoryMB: 32\n"
    "    gpuNumber: 1\n    command: sleep 3600\n"
)


def start_server(cluster: NvmlRayCluster) -> tuple[subprocess.Popen[bytes], httpx.Client]:
    port = free_port()
    args = [sys.executable, "-m", "gpuyard", "up", "--port", str(port),
            "--data-dir", str(cluster.data_dir), "--engine", cluster.engine,
            "--task-network", cluster.task_network]
    log = open(cluster.data_dir.parent / "server.log", "ab")  # noqa: SIM115 - the child's
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx.get(f"{base}/healthz").status_code == 200:
                token = (cluster.data_dir / "admin-token").read_text().strip()
                return proc, httpx.Client(
                    base_url=base, timeout=30, headers={"Authorization": f"Bearer {token}"}
                )
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("server did not start")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def nodes_cpu_s(cluster: NvmlRayCluster) -> float:
    """CPU time of every process under the nodes' raylets (their agents among them)."""
    total = 0.0
    for node in cluster.nodes.values():
        for pid in descendants(node.all_processes["raylet"][0].process.pid):
            with contextlib.suppress(OSError, IndexError):  # ended meanwhile
                total += cpu_s(pid)
    return total


def run_tasks(http: httpx.Client, n: int) -> list[str]:
    jobs = []
    for i in range(n):
        r = http.post("/api/v1/jobs", content=SLEEPER.format(i=i),
                      headers={"Content-Type": "application/yaml"})
        r.raise_for_status()
        jobs.append(r.json()["id"])
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        states = [http.get(f"/api/v1/jobs/{j}").json()["state"] for j in jobs]
        if all(s == "RUNNING" for s in states):
            return jobs
        time.sleep(1)
    raise SystemExit(f"not all {n} jobs ran: {states}")


def wait_for_readings(scrape: httpx.Client, gpus: int, tasks: int) -> dict[str, int]:
    deadline = time.monotonic() + 60
    while True:
        seen = contents(scrape.get("/metrics").text)
        if (seen["dcgm_util"] >= gpus and seen["task_memory"] >= tasks) or (
            time.monotonic() > deadline
        ):
            return seen
        time.sleep(1)


def contents(text: str) -> dict[str, int]:
    families = {f.name: f.samples for f in text_string_to_metric_families(text)}
    return {
        "dcgm_util": len(families.get("DCGM_FI_DEV_GPU_UTIL", [])),
        "task_memory": len(families.get("gpuyard_task_memory_bytes", [])),
        "nodes_answered": sum(s.value == 1 for s in families.get("gpuyard_node_scrape_up", [])),
        "bytes": len(text),
    }


def measure(proc: subprocess.Popen[bytes], http: httpx.Client, scrape: httpx.Client, n: int):
    lat: dict[str, list[float]] = {"metrics": [], "nodes": []}
    cpu: dict[str, float] = {"metrics": 0.0, "nodes": 0.0}
    for _ in range(n):
        for name, client, path in (("metrics", scrape, "/metrics"),
                                   ("nodes", http, "/api/v1/nodes")):
            c0, t0 = cpu_s(proc.pid), time.perf_counter()
            client.get(path).raise_for_status()
            lat[name].append(time.perf_counter() - t0)
            cpu[name] += cpu_s(proc.pid) - c0
    return lat, cpu


def report(lat: dict[str, list[float]], cpu: dict[str, float], n: int) -> None:
    for name, xs in lat.items():
        print(f"{name:8s} p50 {pct(xs, 50) * 1000:7.1f} ms  p95 {pct(xs, 95) * 1000:7.1f} ms  "
              f"p99 {pct(xs, 99) * 1000:7.1f} ms  mean {statistics.mean(xs) * 1000:7.1f} ms  "
              f"server CPU {cpu[name] / n * 1000:6.1f} ms/request")
    ratio = pct(lat["metrics"], 99) / pct(lat["nodes"], 99)
    print(f"/metrics p99 / /api/v1/nodes p99 = {ratio:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scrapes", type=int, default=300)
    ap.add_argument("--tasks", type=int, default=20)
    args = ap.parse_args()
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}; python {platform.python_version()}")
    os.environ["GPUYARD_TASK_SUBNET"] = random_subnets()[0]
    with tempfile.TemporaryDirectory(prefix="gpuyard-scrape-") as tmp:
        root = Path(tmp)
        nvml = build_fake_nvml(root / "nvml")
        began = time.monotonic()
        cluster = NvmlRayCluster(root / "data", nvml, UTIL, gpus=GPUS_PER_NODE)
        print(f"3-node Ray cluster (fake NVML, {GPUS_PER_NODE} GPUs each) up in "
              f"{time.monotonic() - began:.1f}s")
        proc, http = start_server(cluster)
        try:
            token = (cluster.data_dir / "metrics-token").read_text().strip()
            scrape = httpx.Client(base_url=str(http.base_url), timeout=30,
                                  headers={"Authorization": f"Bearer {token}"})
            jobs = run_tasks(http, args.tasks)
            seen = wait_for_readings(scrape, 3 * GPUS_PER_NODE, args.tasks)
            print(f"one scrape: {seen}")
            measure(proc, http, scrape, 10)  # warm-up
            n0, t0 = nodes_cpu_s(cluster), time.monotonic()
            lat, cpu = measure(proc, http, scrape, args.scrapes)
            n1, spell = nodes_cpu_s(cluster), time.monotonic() - t0
            time.sleep(spell)  # as long, quiet: what the nodes use without scrapes
            quiet = nodes_cpu_s(cluster) - n1
            report(lat, cpu, args.scrapes)
            print(f"nodes' CPU: {(n1 - n0) * 1000 / args.scrapes:.1f} ms per scrape measured, "
                  f"{(n1 - n0 - quiet) * 1000 / args.scrapes:.1f} ms beyond the quiet spell "
                  f"({quiet:.2f} s CPU in {spell:.0f} s)")
            for j in jobs:
                http.post(f"/api/v1/jobs/{j}/cancel")
            time.sleep(5)
        finally:
            proc.terminate()
            proc.wait(30)
            cluster.shutdown()
            for tag in nodes_under(cluster.data_dir):
                remove_node_network(tag)


if __name__ == "__main__":
    main()
