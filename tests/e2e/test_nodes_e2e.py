"""Distributed-job env and node operations on the real server with real containers: a 2-task
job's containers see their RANK, WORLD_SIZE, MASTER_ADDR/PORT and hosts file; an admin cordons
the node from the CLI and a new job waits until it is uncordoned."""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.container]

PROBE = r"""
i=$GPUYARD_TASK_INDEX
env | grep -E '^(RANK|WORLD_SIZE|LOCAL_RANK|MASTER_ADDR|MASTER_PORT|PAI_[A-Z_]+_worker_[0-9_a-z]+)=' \
  | sort > /output/$i.env
cat /run/gpuyard/hosts > /output/$i.hosts
getent hosts worker-1 > /output/$i.resolved || grep -w worker-1 /etc/hosts > /output/$i.resolved
"""


def cli(server, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GPUYARD_URL": server.url, "GPUYARD_TOKEN": server.token}
    return subprocess.run(
        [sys.executable, "-m", "gpuyard", *args],
        env=env, text=True, capture_output=True, timeout=60, check=False,
    )


def test_a_two_task_job_sees_its_ranks_master_and_hosts(server):
    out = server.storage / "out"
    spec = textwrap.dedent(f"""\
        name: ddp-env
        outputDir: {out}
        taskRoles:
          worker:
            taskNumber: 2
            cpuNumber: 0.5
            memoryMB: 256
            ports: {{http: 2}}
            command: {json.dumps(PROBE)}
        """)
    job = server.wait(server.submit(spec))
    assert job["state"] == "SUCCEEDED", job
    envs = [
        dict(line.split("=", 1) for line in (out / f"{i}.env").read_text().splitlines())
        for i in (0, 1)
    ]
    assert [e["RANK"] for e in envs] == ["0", "1"]
    assert [e["LOCAL_RANK"] for e in envs] == ["0", "1"]  # one node: local = global
    assert {e["WORLD_SIZE"] for e in envs} == {"2"}
    # each task at its own address (its network namespace's), in the node's task subnet
    ips = [envs[0]["PAI_HOST_IP_worker_0"], envs[0]["PAI_HOST_IP_worker_1"]]
    subnet = ipaddress.ip_network(os.environ["GPUYARD_TASK_SUBNET"])
    assert len(set(ips)) == 2 and all(ipaddress.ip_address(ip) in subnet for ip in ips)
    assert {e["MASTER_ADDR"] for e in envs} == {ips[0]}
    master = {e["MASTER_PORT"] for e in envs}
    assert len(master) == 1 and 20000 <= int(master.pop()) <= 29999
    http0 = envs[0]["PAI_PORT_LIST_worker_0_http"].split(",")
    http1 = envs[0]["PAI_PORT_LIST_worker_1_http"].split(",")
    assert len(set(http0 + http1 + [envs[0]["MASTER_PORT"]])) == 5  # never shared on a node
    assert (out / "0.hosts").read_text() == f"{ips[0]} worker-0\n{ips[1]} worker-1\n"
    assert (out / "0.resolved").read_text().split()[:2] == [ips[1], "worker-1"]


def test_cordon_from_the_cli_holds_new_work_until_uncordon(server, tmp_path):
    node = server.http.get("/api/v1/nodes").json()["nodes"][0]["name"]
    done = cli(server, "admin", "node", "cordon", node, "--reason", "maintenance")
    assert done.returncode == 0, done.stderr
    listing = cli(server, "nodes")
    assert "CORDONED" in listing.stdout and "maintenance" in listing.stdout
    assert "cordoned" in listing.stdout  # the free GPUs' state
    spec = "name: waits\ntaskRoles:\n  main:\n    memoryMB: 128\n    command: 'true'\n"
    job_id = server.submit(spec)
    time.sleep(2)
    assert server.job(job_id)["state"] == "QUEUED"
    refused = cli(server, "admin", "node", "drain", node, "--deadline", "soon")
    assert refused.returncode != 0 and "deadline" in refused.stderr
    assert cli(server, "admin", "node", "uncordon", node).returncode == 0
    assert server.wait(job_id)["state"] == "SUCCEEDED"
