"""Image pulls on Ray nodes: the agent's `start` returns at once, the node pulls in the
background, and the wait shows through the Ray engine's status polls; `gpuyard image pull X
--all-nodes` fills every node's store first, so a 3-node job starts with its image present
(a real 3-node cluster, and a registry on 127.0.0.1 the nodes reach over plain HTTP)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from oci_registry import HungRegistry, Registry, busybox_layout

pytestmark = [pytest.mark.ray, pytest.mark.container]
SMALL = "    cpuNumber: 0.2\n    memoryMB: 64\n"
ONE_PER_NODE = "    taskNumber: 3\n    cpuNumber: 1.5\n    memoryMB: 64\n"  # 2 CPUs a node


@pytest.fixture(scope="module", autouse=True)
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    """Made before the module's cluster, whose nodes take its address as an insecure registry
    from their environment when they start."""
    if shutil.which("skopeo") is None or shutil.which("umoci") is None:
        pytest.skip("skopeo and umoci are needed (make system)")
    served = Registry(busybox_layout(tmp_path_factory.mktemp("registry")))
    with pytest.MonkeyPatch.context() as env:
        env.setenv("GPUYARD_INSECURE_REGISTRIES", served.host)
        yield served
    served.close()


def cli(server, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GPUYARD_URL": server.url, "GPUYARD_TOKEN": server.token}
    return subprocess.run([sys.executable, "-m", "gpuyard", *args], env=env, text=True,
                          capture_output=True, timeout=120, check=False)


def test_a_task_waiting_for_its_image_on_a_ray_node_holds_up_nothing(ray_server, ray_cluster):
    hung = HungRegistry()
    try:
        image = f"{hung.host}/evil:1"
        hostile = ray_server.submit(
            f"name: hostile\nimage: {image}\ntaskRoles:\n  main:\n{SMALL}    command: 'true'\n"
        )
        deadline = time.monotonic() + 60
        while not (ray_server.job(hostile)["tasks"] or [{}])[0].get("message"):
            assert time.monotonic() < deadline, ray_server.job(hostile)
            time.sleep(0.3)
        [task] = ray_server.job(hostile)["tasks"]
        assert task["state"] == "STARTING" and task["reason"] == "PullingImage", task
        assert task["message"].startswith(f"pulling image {image}"), task
        victim = ray_server.wait(ray_server.submit(
            f"name: victim\ntaskRoles:\n  main:\n{SMALL}    command: echo hi\n"), timeout=60)
        assert victim["state"] == "SUCCEEDED", victim
        assert ray_server.job(hostile)["state"] == "SCHEDULED"
        ray_server.http.post(f"/api/v1/jobs/{hostile}/cancel")
        stopped = ray_server.wait(hostile, timeout=30)
        assert stopped["state"] == "STOPPED", stopped
        assert [t["reason"] for t in stopped["tasks"]] == ["Cancelled"]
    finally:
        hung.close()


def test_an_image_pulled_on_all_nodes_is_present_when_a_3_node_job_starts(
    ray_server, ray_cluster, registry: Registry
) -> None:
    image = f"{registry.host}/busybox:1"
    bad = cli(ray_server, "image", "pull", image, "--node", "ray-z")
    assert bad.returncode != 0 and "no node ray-z in the cluster (its nodes: ray-a, ray-b, ray-c)" \
        in bad.stderr, bad
    pulled = cli(ray_server, "image", "pull", image, "--all-nodes")
    assert pulled.returncode == 0, pulled
    assert pulled.stdout.split("\n")[:3] == [f"ray-{n}: present" for n in "abc"], pulled.stdout
    sent = registry.sent["blob"]
    listed = cli(ray_server, "image", "ls", "--all-nodes")
    assert listed.returncode == 0 and "ray-a, ray-b, ray-c" in listed.stdout, listed
    job = ray_server.wait(ray_server.submit(
        f"name: three\nimage: {image}\ntaskRoles:\n  main:\n{ONE_PER_NODE}"
        "    command: cat /etc/marker\n"), timeout=90)
    assert job["state"] == "SUCCEEDED", job
    assert sorted(t["node"] for t in job["tasks"]) == ["ray-a", "ray-b", "ray-c"]
    events = ray_server.http.get(f"/api/v1/jobs/{job['id']}/events").json()["events"]
    starts = [e for e in events if e["task"] and e["toState"] == "RUNNING"]
    assert [e["message"] for e in starts] == ["image present"] * 3, events
    assert not [e for e in events if e["reason"] == "PullingImage"], events
    assert registry.sent["blob"] == sent  # no pull in the start path
