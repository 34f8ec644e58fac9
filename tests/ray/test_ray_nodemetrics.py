"""Issue 20 on a real 3-node Ray cluster whose GPUs look real: every node loads the fake NVML
library with GPUs, utilisation and health events of its own (tests/nvmlcluster.py), so its
agent finds, checks and reads them through the real pynvml.

One cluster, one server and one Prometheus for the module. The idle job (on ray-b, whose GPUs
idle at 2 %) starts first and its 60 s window runs while the other tests do; the test that
kills a node comes last.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from e2e.conftest import Server
from e2e.test_prometheus import prometheus_on, query
from gpus.conftest import fake_nvml_dir  # noqa: F401 - fixture
from nvmlcluster import NvmlRayCluster, gpu_uuid
from raycluster import NODES

pytestmark = [pytest.mark.ray, pytest.mark.e2e, pytest.mark.container]

GPUS_PER_NODE = 2
UTIL = {"ray-a": 90, "ray-b": 2, "ray-c": 70}  # ray-b's GPUs idle
IDLE = {"idleGpuAction": "stop", "idleGpuThresholdPct": 10, "idleGpuWindowS": 60}
SLEEPER = "name: {name}\ntaskRoles:\n  main:\n    cpuNumber: 0.2\n    memoryMB: 64\n" \
    "    gpuNumber: {gpus}\n    command: sleep 600\n"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, fake_nvml_dir: Path) -> Iterator[NvmlRayCluster]:  # noqa: F811
    if os.geteuid() != 0:
        pytest.skip("mknod of the GPUs' device nodes needs root")
    began = time.monotonic()
    c = NvmlRayCluster(tmp_path_factory.mktemp("raynvml") / "data", fake_nvml_dir, UTIL)
    print(f"3-node Ray cluster with fake NVML up in {time.monotonic() - began:.1f}s")
    yield c
    c.shutdown()


@pytest.fixture(scope="module")
def server(cluster: NvmlRayCluster, tmp_path_factory) -> Iterator[Server]:
    log = tmp_path_factory.mktemp("raynvml-server") / "server.log"
    srv = Server(cluster.data_dir, log, "--engine", cluster.engine,
                 "--task-network", cluster.task_network)
    try:
        srv.start()
        r = srv.http.patch("/api/v1/tenants/default", json=IDLE)
        assert r.status_code == 200, r.text
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def prometheus(server: Server, tmp_path_factory) -> Iterator[httpx.Client]:
    tmp = tmp_path_factory.mktemp("raynvml-prometheus")
    with prometheus_on(server.port, server.data_dir / "metrics-token", tmp) as client:
        yield client


def nodes(server: Server) -> dict[str, dict]:
    r = server.http.get("/api/v1/nodes")
    assert r.status_code == 200, r.text
    return {n["name"]: n for n in r.json()["nodes"]}


def only_on(server: Server, node: str) -> None:
    """Cordon every node but `node`."""
    for name in NODES:
        action = "uncordon" if name == node else "cordon"
        r = server.http.post(f"/api/v1/nodes/{name}/{action}", json={} if name != node else None)
        assert r.status_code == 200, r.text


def uncordon_all(server: Server) -> None:
    for name in NODES:
        server.http.post(f"/api/v1/nodes/{name}/uncordon")


def wait_for(what, timeout: float = 60, step: float = 0.5):
    deadline = time.monotonic() + timeout
    while True:
        found = what()
        if found or time.monotonic() > deadline:
            return found
        time.sleep(step)


@pytest.fixture(scope="module")
def idle_job(server: Server) -> str:
    """A 2-GPU job on ray-b (the others cordoned meanwhile), whose GPUs idle at 2 %."""
    deadline = time.monotonic() + 60
    while set(nodes(server)) != set(NODES):
        assert time.monotonic() < deadline, nodes(server)
        time.sleep(0.5)
    only_on(server, "ray-b")
    try:
        job = server.submit(SLEEPER.format(name="idle", gpus=2))
        running = server.wait(job, {"RUNNING"}, timeout=60)
    finally:
        uncordon_all(server)
    assert [t["node"] for t in running["tasks"]] == ["ray-b"], running
    return job


def test_every_node_finds_its_gpus_through_its_own_nvml(server, idle_job):
    found = nodes(server)
    for name in NODES:
        gpus = found[name]["gpus"]
        assert [(g["uuid"], g["fake"]) for g in gpus] == [
            (gpu_uuid(name, i), False) for i in range(GPUS_PER_NODE)
        ], found[name]
    util = wait_for(lambda: found["ray-a"]["gpus"][0]["utilizationPct"]
                    or nodes(server)["ray-a"]["gpus"][0]["utilizationPct"], timeout=30)
    assert util == UTIL["ray-a"]


def test_prometheus_sees_every_gpu_of_every_node(server, prometheus, idle_job):
    per_node = query(prometheus, "count by (node) (DCGM_FI_DEV_GPU_UTIL)")
    assert {r["metric"]["node"]: r["value"][1] for r in per_node} == {
        name: str(GPUS_PER_NODE) for name in NODES
    }
    held = query(prometheus, f'DCGM_FI_DEV_GPU_UTIL{{job="{idle_job}"}}')
    assert sorted((r["metric"]["node"], r["metric"]["gpu"]) for r in held) == [
        ("ray-b", "0"), ("ray-b", "1")
    ]
    assert {r["metric"]["tenant"] for r in held} == {"default"}
    assert {r["value"][1] for r in held} == {str(UTIL["ray-b"])}
    memory = query(prometheus, f'gpuyard_task_memory_bytes{{job="{idle_job}"}}')
    assert [r["metric"]["node"] for r in memory] == ["ray-b"]
    up = query(prometheus, "gpuyard_node_scrape_up == 1")
    assert sorted(r["metric"]["node"] for r in up) == sorted(NODES)


def test_an_unhealthy_gpu_on_a_second_node_gets_nothing(server, cluster, idle_job):
    cluster.health["ray-c"].write_text("1 xid 79\n")
    sick = wait_for(lambda: not nodes(server)["ray-c"]["gpus"][1]["healthy"], timeout=30)
    assert sick, nodes(server)["ray-c"]
    assert nodes(server)["ray-c"]["gpus"][1]["healthCause"] == "XID 79"
    only_on(server, "ray-c")
    try:
        first = server.submit(SLEEPER.format(name="one", gpus=1))
        second = server.submit(SLEEPER.format(name="two", gpus=1))
        running = server.wait(first, {"RUNNING"}, timeout=60)
        assert [(t["node"], [g["index"] for g in t["gpus"]]) for t in running["tasks"]] == [
            ("ray-c", [0])
        ]
        time.sleep(3)  # several cycles: GPU 1 is free but unhealthy, so the second waits
        assert server.job(second)["state"] == "QUEUED"
    finally:
        for job in (first, second):
            server.http.post(f"/api/v1/jobs/{job}/cancel")
        uncordon_all(server)
    for job in (first, second):
        server.wait(job, timeout=30)


def test_the_idle_job_on_the_second_node_is_stopped(server, idle_job):
    job = server.wait(idle_job, timeout=120)
    assert job["state"] == "STOPPED" and job["reason"] == "IdleGPU", job
    (event,) = [e for e in server.job(idle_job)["events"] if e["reason"] == "IdleGPU"
                and e["fromState"] == "RUNNING" and e["toState"] == "RUNNING"]
    assert "under 10%" in event["message"]


def instant(prom: httpx.Client, expr: str) -> list[dict]:
    return prom.get("/api/v1/query", params={"query": expr}).json()["data"]["result"]


def test_a_killed_nodes_series_go_stale(server, cluster, prometheus):
    """Only ray-c's series: the scrape itself goes on (ray-a's series stay), because the wait
    for the nodes is half of Prometheus' scrape timeout (1 s here)."""
    query(prometheus, 'DCGM_FI_DEV_GPU_UTIL{node="ray-c"}')
    killed = time.monotonic()
    cluster.lose("ray-c")
    stale = wait_for(
        lambda: not instant(prometheus, 'DCGM_FI_DEV_GPU_UTIL{node="ray-c"}')
        and instant(prometheus, 'DCGM_FI_DEV_GPU_UTIL{node="ray-a"}'),
        timeout=30,
        step=0.2,
    )
    stale_after = time.monotonic() - killed
    print(f"ray-c's DCGM series stale {stale_after:.1f}s after the kill (scrape every 1 s)")
    assert stale
    assert query(prometheus, 'gpuyard_node_scrape_up{node="ray-c"} == 0')
    assert instant(prometheus, 'up{job="gpuyard"} == 1')
    per_node = query(prometheus, "count by (node) (DCGM_FI_DEV_GPU_UTIL)")
    assert sorted(r["metric"]["node"] for r in per_node) == ["ray-a", "ray-b"]
