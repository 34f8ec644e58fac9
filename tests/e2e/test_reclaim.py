"""Reclaim on the real server: a borrower is preempted, checkpoints, and resumes later.

Two tenants share one node of 4 (fake) GPUs, 2 guaranteed to each. Tenant b borrows all 4;
the default tenant then submits within its guarantee: b's job gets SIGTERM, writes a
checkpoint to /output within its grace period, the default tenant's job runs, and b's job
comes back as attempt 2 (not counted as a retry), sees GPUYARD_RESUMED=1 and its checkpoint.
"""

from __future__ import annotations

import textwrap

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.container]

QUOTA = [{"flavor": "A100-80GB", "guaranteed": 2}]

BORROWER = """\
if [ -f /output/ckpt ]; then
  echo "attempt=$GPUYARD_ATTEMPT resumed=$GPUYARD_RESUMED from=$(cat /output/ckpt)" > /output/resumed
  exit 0
fi
trap 'echo "step-of-attempt-$GPUYARD_ATTEMPT" > /output/ckpt; exit 0' TERM
echo training; sleep 300 & wait
"""


def spec(name: str, tenant: str, gpus: int, out, command: str) -> str:
    body = textwrap.indent(command, " " * 6)
    return (
        f"name: {name}\ntenant: {tenant}\noutputDir: {out}\ntaskRoles:\n  main:\n"
        f"    gpuNumber: {gpus}\n    memoryMB: 128\n    cpuNumber: 0.2\n    command: |\n{body}"
    )


def test_a_borrower_is_preempted_checkpoints_and_resumes(server, tmp_path):
    r = server.http.patch("/api/v1/tenants/default", json={"quotas": QUOTA})
    assert r.status_code == 200, r.text
    r = server.http.post("/api/v1/tenants", json={
        "name": "b", "quotas": QUOTA, "preemptionGraceS": 20,
        "storageRoots": [str(tmp_path / "b-root")],  # its own: roots of tenants never overlap
    })
    assert r.status_code == 201, r.text

    out_b, out_a = tmp_path / "b-root" / "b", server.storage / "a"
    borrower = server.submit(spec("borrower", "b", 4, out_b, BORROWER))
    server.wait(borrower, {"RUNNING"})
    assert any(e["reason"] == "Scheduled (opportunistic)" for e in server.job(borrower)["events"])

    owner = server.submit(spec("owner", "default", 2, out_a, "echo mine > /output/a\n"))
    assert server.wait(owner, timeout=60)["state"] == "SUCCEEDED"
    assert (out_a / "a").read_text().strip() == "mine"
    assert (out_b / "ckpt").read_text().strip() == "step-of-attempt-1"

    job = server.wait(borrower, timeout=60)
    assert job["state"] == "SUCCEEDED", job
    assert job["attempt"] == 2 and job["retriesUsed"] == 0
    first = [t for t in job["tasks"] if t["attempt"] == 1]
    assert [(t["state"], t["reason"]) for t in first] == [("STOPPED", "Preempted")]
    resumed = (out_b / "resumed").read_text().strip()
    assert resumed == "attempt=2 resumed=1 from=step-of-attempt-1"
