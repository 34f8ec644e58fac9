"""Image pulls on Ray nodes: the agent's `start` returns at once, the node pulls in the
background, and the wait shows through the Ray engine's status polls (a real 3-node cluster)."""

from __future__ import annotations

import time

import pytest

from oci_registry import HungRegistry

pytestmark = [pytest.mark.ray, pytest.mark.container]
SMALL = "    cpuNumber: 0.2\n    memoryMB: 64\n"


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
