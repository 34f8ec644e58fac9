"""Issue 20 on a real 3-node Ray cluster whose GPUs look real: every node loads the fake NVML
library with GPUs, utilisation and health events of its own (tests/nvmlcluster.py), so its
agent finds, checks and reads them through the real pynvml.

One cluster, one server and one Prometheus for the module. The idle job (on ray-b, whose GPUs
idle at 2 %) starts first and its 60 s window runs while the other tests do; the test that
kills a node comes last.

`gpuyard exec` and `port-forward` into a task on ray-b (issue 19: through the node's streams
actor, engine/raystreams.py) are here for the same reason: their job runs inside that window,
so they add a job start and a few CLI calls to the module, and no cluster or server of their own.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import pty
import select
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from e2e.conftest import Server, fetch_when_served, free_port
from e2e.test_prometheus import prometheus_on, query
from gpus.conftest import fake_nvml_dir  # noqa: F401 - fixture
from nvmlcluster import NvmlRayCluster, gpu_uuid
from raycluster import NODES, descendants

pytestmark = [pytest.mark.ray, pytest.mark.e2e, pytest.mark.container]

GPUS_PER_NODE = 2
UTIL = {"ray-a": 90, "ray-b": 2, "ray-c": 70}  # ray-b's GPUs idle
IDLE = {"idleGpuAction": "stop", "idleGpuThresholdPct": 10, "idleGpuWindowS": 60}
SLEEPER = "name: {name}\ntaskRoles:\n  main:\n    cpuNumber: 0.2\n    memoryMB: 64\n" \
    "    gpuNumber: {gpus}\n    command: sleep 600\n"
WEB = "name: web\ntaskRoles:\n  main:\n    cpuNumber: 0.2\n    memoryMB: 128\n    command: " \
    "cd /workspace && echo served-on-ray-b > index.html && exec python3 -m http.server 8000\n"


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


@pytest.fixture(scope="module")
def web_job(server: Server) -> Iterator[str]:
    """A CPU-only job on ray-b (not the head: the control plane's own node), a Python HTTP
    server on port 8000 of its task."""
    only_on(server, "ray-b")
    try:
        job = server.submit(WEB)
        running = server.wait(job, {"RUNNING"}, timeout=60)
    finally:
        uncordon_all(server)
    assert [t["node"] for t in running["tasks"]] == ["ray-b"], running
    yield job
    server.http.post(f"/api/v1/jobs/{job}/cancel")


def gpuyard(server: Server, *args: str, **kw) -> subprocess.Popen[bytes]:
    env = {**os.environ, "GPUYARD_URL": server.url, "GPUYARD_TOKEN": server.token}
    return subprocess.Popen([sys.executable, "-m", "gpuyard", *args], env=env, **kw)


def read_until(fd: int, proc: subprocess.Popen[bytes], text: bytes | None) -> bytes:
    """What `fd` gives until `text` shows (None: until `proc` ends), 60 s at most."""
    seen = b""
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        if text is not None and text in seen:
            break
        if select.select([fd], [], [], 0.2)[0]:
            try:
                seen += os.read(fd, 4096)
            except OSError:
                break
    return seen


def under_node(cluster: NvmlRayCluster, node: str) -> dict[int, str]:
    """The processes under a node's raylet (its Ray workers and their children): pid → command
    line."""
    raylet = cluster.nodes[node].all_processes["raylet"][0].process.pid
    found = {}
    for pid in descendants(raylet):
        with contextlib.suppress(OSError):
            found[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    return found


def test_exec_into_a_task_on_another_ray_node_returns_its_output_and_exit_code(
    server, cluster, web_job
):
    command = ["sh", "-c", "uname -n; echo $PAI_CURRENT_CONTAINER_IP; echo oops >&2; exit 7"]
    proc = gpuyard(server, "exec", web_job, "--", *command, stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 7, (out, err)
    assert err.decode().strip() == "oops"
    hostname, address = out.decode().split()
    assert hostname == "main-0"
    subnets = json.loads((cluster.data_dir / "nodes" / "subnets.json").read_text())
    assert ipaddress.ip_address(address) in ipaddress.ip_network(subnets["ray-b"]), subnets
    events = server.http.get(f"/api/v1/jobs/{web_job}/events").json()["events"]
    execs = [e["message"] for e in events if e["reason"] == "Exec"]
    assert execs == [f"admin ran in main/0: {shlex.join(command)}"]


def test_exec_it_runs_on_the_tasks_own_node_with_a_terminal(server, cluster, web_job):
    """The session's `crun exec` runs under ray-b's raylet (in its streams actor), which gets
    the terminal's master over SCM_RIGHTS. On one machine every node could run it (one crun
    state, one filesystem), so where it runs is asserted, not only that it works."""
    main, child = pty.openpty()
    proc = gpuyard(server, "exec", web_job, "-it", "--", "sh", stdin=child, stdout=child,
                   stderr=child)
    os.close(child)
    os.write(main, b"test -t 0 && echo on-a-tty-$((6*7))\n")
    seen = read_until(main, proc, b"on-a-tty-42")
    assert b"on-a-tty-42" in seen, seen
    execs = {n: [c for c in under_node(cluster, n).values() if "--console-socket" in c]
             for n in NODES}
    assert [n for n, found in execs.items() if found] == ["ray-b"], execs
    os.write(main, b"exit 5\n")
    seen += read_until(main, proc, None)
    assert proc.wait(10) == 5, seen
    os.close(main)


def test_port_forward_reaches_an_http_server_in_a_task_on_another_ray_node(server, web_job):
    port = free_port()
    proc = gpuyard(server, "port-forward", web_job, f"{port}:8000", stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        assert b"Forwarding" in proc.stdout.readline()
        for _ in range(2):  # two connections, one stream each through the node's actor
            served = fetch_when_served(f"http://127.0.0.1:{port}/")
            assert served.strip() == b"served-on-ray-b"
    finally:
        proc.terminate()
        proc.wait(10)


def test_exec_works_again_after_the_nodes_streams_actor_died(server, cluster, web_job):
    """A streams actor whose process died (killed, out of memory) is made again: an exec may be
    told to try again meanwhile, never refused for good."""
    def streams_actors() -> list[int]:
        return [pid for pid, line in under_node(cluster, "ray-b").items()
                if line.startswith("ray::StreamsActor")]

    deadline = time.monotonic() + 60
    while not (actors := streams_actors()) and time.monotonic() < deadline:
        # made on the node's first session; its process names itself once it runs (slowly,
        # on a loaded machine)
        gpuyard(server, "exec", web_job, "--", "true").communicate(timeout=60)
        time.sleep(1)
    assert len(actors) == 1, under_node(cluster, "ray-b")
    os.kill(actors[0], signal.SIGKILL)
    tries: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 30
    while not tries or (tries[-1][0] != 0 and time.monotonic() < deadline):
        proc = gpuyard(server, "exec", web_job, "--", "true", stderr=subprocess.PIPE)
        _, err = proc.communicate(timeout=60)
        tries.append((proc.returncode, err))
    assert tries[-1][0] == 0, tries
    assert all(b"try again" in err for code, err in tries if code != 0), tries


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
