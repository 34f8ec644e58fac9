"""Issue 6 acceptance on a real 3-node Ray cluster: a 2-node PyTorch DDP job, a node lost
mid-job, and the control plane killed with SIGKILL mid-job.

Every job is the same real training run (`ddp_digits.py`): two tasks of 2 fake GPUs each, so
on nodes of 2 GPUs its ranks always land on two different nodes. The tests share one cluster;
the one that loses a node comes last.
"""

from __future__ import annotations

import json
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

pytestmark = [pytest.mark.ray, pytest.mark.e2e, pytest.mark.container]

REPO = Path(__file__).resolve().parents[2]
TRAIN = Path(__file__).with_name("ddp_digits.py")
MIN_ACCURACY = 0.9
NODE_LOST_WITHIN_S = 30.0


def in_container(path: Path) -> Path:
    """Where a file of this checkout is seen in a task: the checkout is the job's dataDir
    (at /data), because a task's /tmp is its own and a checkout may live under /tmp."""
    return Path("/data") / path.relative_to(REPO)


def training_command() -> str:
    """This venv's python (as a venv, so that torch and scikit-learn are found) and the script."""
    python = Path(sys.prefix) / "bin" / "python3"
    if python.is_relative_to(REPO):
        python = in_container(python)
    return f"{python} {in_container(TRAIN)}"


def ddp_spec(out: Path, epochs: int, pause_s: float) -> str:
    return textwrap.dedent(f"""\
        name: ddp-digits
        dataDir: {REPO}
        outputDir: {out}
        retryCount: 0
        env:
          EPOCHS: {epochs}
          EPOCH_SLEEP_S: {pause_s}
        taskRoles:
          worker:
            taskNumber: 2
            cpuNumber: 1
            memoryMB: 1536
            gpuNumber: 2
            command: {training_command()}
        """)


def wait_for_log(server, job_id: str, task: str, text: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = server.http.get(f"/api/v1/jobs/{job_id}/logs", params={"task": task})
        if r.status_code == 200 and text in r.text:
            return
        time.sleep(0.5)
    raise AssertionError(f"{task} of {job_id} never logged {text!r}: {server.job(job_id)}")


def output_dir(ray_cluster, name: str) -> Path:
    """A job's outputDir: under the server's storage root (the dir above its data dir)."""
    return ray_cluster.data_dir.parent / name


def result(out: Path) -> dict:
    return json.loads((out / "result.json").read_text())


def started_events(job: dict) -> list[dict]:
    return [e for e in job["events"] if e["toState"] == "RUNNING" and not e["task"]]


def test_ddp_job_trains_across_two_nodes(ray_server, ray_cluster):
    nodes = {n["name"]: n for n in ray_server.http.get("/api/v1/nodes").json()["nodes"]}
    assert set(nodes) == {"ray-a", "ray-b", "ray-c"}, nodes
    out = output_dir(ray_cluster, "ddp")
    job_id = ray_server.submit(ddp_spec(out, epochs=30, pause_s=0))
    wait_for_log(ray_server, job_id, "worker/1", "epoch 1 ")
    followed = follow_log(ray_server, job_id, "worker/1")  # a task on another node, followed
    job = ray_server.wait(job_id, timeout=180)
    assert job["state"] == "SUCCEEDED", job
    placed = {t["node"] for t in job["tasks"]}
    assert len(placed) == 2 and placed <= set(nodes), job["tasks"]
    assert result(out)["accuracy"] >= MIN_ACCURACY, result(out)
    assert result(out)["world_size"] == 2
    assert (out / "checkpoint.pt").stat().st_size > 0
    assert "rank 1/2" in followed and "epoch 29 test accuracy" in followed, followed


def follow_log(server, job_id: str, task: str) -> str:
    with server.http.stream(
        "GET",
        f"/api/v1/jobs/{job_id}/logs",
        params={"task": task, "follow": "true"},
        timeout=httpx.Timeout(10, read=180),
    ) as r:
        assert r.status_code == 200
        return "".join(r.iter_text())


def test_control_plane_killed_mid_job_adopts_and_records_once(ray_server, ray_cluster):
    out = output_dir(ray_cluster, "restart")
    job_id = ray_server.submit(ddp_spec(out, epochs=16, pause_s=1.0))
    wait_for_log(ray_server, job_id, "worker/0", "epoch 2 ")
    ray_server.kill9()
    time.sleep(1)
    ray_server.start()  # same data dir: reconnects to Ray, finds the detached agents
    job = ray_server.wait(job_id, timeout=180)
    assert job["state"] == "SUCCEEDED", job
    assert job["attempt"] == 1 and len(job["tasks"]) == 2, job
    assert len(started_events(job)) == 1, job["events"]
    assert result(out)["resumed_from"] == 0  # never restarted: the same processes finished
    assert ray_server.logs(job_id, "worker/0").count("rank 0/2") == 1


def test_lost_node_fails_its_tasks_as_node_lost_and_the_job_retries(ray_server, ray_cluster):
    out = output_dir(ray_cluster, "node-lost")
    job_id = ray_server.submit(ddp_spec(out, epochs=12, pause_s=1.0))
    wait_for_log(ray_server, job_id, "worker/0", "epoch 2 ")
    first = ray_server.job(job_id)
    victim = next(t["node"] for t in first["tasks"] if t["node"] != "ray-a")  # not the head
    lost_at = time.monotonic()
    ray_cluster.lose(victim)
    job = wait_until(ray_server, job_id, lambda j: j["attempt"] >= 2, NODE_LOST_WITHIN_S + 10)
    lost = [e for e in job["events"] if e["reason"] == "NodeLost"]
    print(f"node {victim} lost: job requeued after {time.monotonic() - lost_at:.1f}s")
    assert lost, job["events"]
    job = ray_server.wait(job_id, timeout=180)
    assert job["state"] == "SUCCEEDED", job
    assert job["attempt"] == 2 and job["retriesUsed"] == 0, (job["events"], job["tasks"])
    retried = [t for t in job["tasks"] if t["attempt"] == 2]
    assert victim not in {t["node"] for t in retried}, retried
    assert len({t["node"] for t in retried}) == 2
    lost_tasks = [t for t in job["tasks"] if t["attempt"] == 1 and t["node"] == victim]
    assert [t["reason"] for t in lost_tasks] == ["NodeLost"], job["tasks"]
    assert result(out)["resumed_from"] > 0 and result(out)["accuracy"] >= MIN_ACCURACY
    nodes = {n["name"] for n in ray_server.http.get("/api/v1/nodes").json()["nodes"]}
    assert victim not in nodes


def wait_until(server, job_id: str, predicate, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = server.job(job_id)
        if predicate(job):
            return job
        time.sleep(0.5)
    raise AssertionError(f"job {job_id} after {timeout}s: {server.job(job_id)}")
