"""The queue view on the real server: a second tenant borrows the default tenant's GPUs, its
next job waits, and `GET /api/v1/queue`, `gpuyard queue`, `jobs` and `show` say so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.container]

JOB = "name: {name}\ntenant: team-b\ntaskRoles:\n  main:\n    gpuNumber: {gpus}\n    command: sleep 300\n"


def cli(server, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GPUYARD_URL": server.url, "GPUYARD_TOKEN": server.token}
    return subprocess.run(
        [sys.executable, "-m", "gpuyard", *args],
        env=env,
        text=True,
        capture_output=True,
        timeout=60,
        check=False,
    )


def wait_for_position(server, job_id: str, timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = server.job(job_id)
        if job["pendingPosition"] is not None:
            return job
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} got no queue position: {server.job(job_id)}")


def test_borrowing_and_a_queued_job_in_every_view(server):
    r = server.http.post("/api/v1/tenants", json={"name": "team-b"})
    assert r.status_code == 201, r.text
    borrower = server.submit(JOB.format(name="borrower", gpus=4))
    assert server.wait(borrower, {"RUNNING"})["opportunistic"] is True
    waiting = server.submit(JOB.format(name="waiting", gpus=1))
    job = wait_for_position(server, waiting)
    assert job["state"] == "QUEUED" and job["opportunistic"] is False
    assert (job["pendingPosition"], job["pendingQueueLength"]) == (1, 1)
    assert job["pendingCode"] and "1st of 1 in tenant team-b" in job["pendingReason"]
    assert server.job(borrower)["borrowed"] == [{"flavor": "A100-80GB", "gpus": 4}]

    body = server.http.get("/api/v1/queue").json()
    assert body["cluster"] == [{"flavor": "A100-80GB", "capacity": 4, "allocated": 4}]
    tenants = {t["name"]: t for t in body["tenants"]}
    numbers = {
        name: {k: t["flavors"][0][k] for k in ("guaranteed", "used", "borrowed", "lent")}
        for name, t in tenants.items()
    }
    assert numbers == {
        "default": {"guaranteed": 4, "used": 0, "borrowed": 0, "lent": 4},
        "team-b": {"guaranteed": 0, "used": 4, "borrowed": 4, "lent": 0},
    }
    assert [j["id"] for j in tenants["team-b"]["queue"]] == [waiting]
    assert tenants["default"]["queue"] == []

    as_json = cli(server, "queue", "-o", "json")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["tenants"][1]["queue"][0]["id"] == waiting
    table = cli(server, "queue")
    assert table.returncode == 0, table.stderr
    assert "team-b" in table.stdout and waiting in table.stdout
    assert "▓▓▓▓" in table.stdout and "▒▒▒▒" in table.stdout
    assert "guaranteed 0 · used 4 · borrowed 4 · lent 0" in table.stdout
    assert "RUNNING OPP" in cli(server, "jobs").stdout
    shown = cli(server, "show", waiting).stdout
    assert "position 1 of 1 in tenant team-b" in shown
    assert "opportunistic: borrows 4 A100-80GB GPUs" in cli(server, "show", borrower).stdout
