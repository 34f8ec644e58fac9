"""Every node's readings behind the one `/metrics` door (issue 20).

The series of other nodes' GPUs and tasks now reach `/metrics` too. A hostile caller without
the scrape token must learn nothing more of them than of the server's own node: 401 without a
token, 403 with a member's; and an open `/metrics` (`--metrics-open`) shows every node's
DCGM and task series without the labels that name a job, a task or a user. A node's agent
serves nothing on the network: its readings reach the server over Ray only.
"""

from __future__ import annotations

from fastapi.testclient import TestClient

from gpuyard.api import create_app
from gpuyard.store import Membership, PlatformRole, TenantRole
from metrics.conftest import parse
from metrics.test_node_readings import report, rig  # noqa: F401 - fixture

PRIVATE = {"job", "task", "owner", "user"}


def running_job_on_n2(rig) -> str:  # noqa: F811
    job = rig.submit(gpus=2)
    rig.start(job)
    report(rig, {"n1": 80.0, "n2": 3.0})
    return job


def test_no_token_or_a_members_token_no_node_readings(rig):  # noqa: F811
    running_job_on_n2(rig)
    rig.store.users.create("mallory", PlatformRole.USER, [Membership("red", TenantRole.MEMBER)])
    mallory = rig.store.tokens.create("mallory", "t").secret
    with TestClient(create_app(rig.ctl)) as client:
        client.app.state.metrics_token = "s3cret"  # type: ignore[attr-defined]
        assert client.get("/metrics").status_code == 401
        r = client.get("/metrics", headers={"Authorization": f"Bearer {mallory}"})
        assert r.status_code == 403
        assert "DCGM" not in r.text


def test_open_metrics_show_every_node_without_job_labels(rig):  # noqa: F811
    job = running_job_on_n2(rig)
    with TestClient(create_app(rig.ctl)) as client:
        client.app.state.metrics_open = True  # type: ignore[attr-defined]
        r = client.get("/metrics")
    assert r.status_code == 200
    assert job not in r.text
    s = parse(r.text)
    dcgm = [dict(labels) for name, labels in s if name == "DCGM_FI_DEV_GPU_UTIL"]
    assert sorted((d["node"], d["gpu"]) for d in dcgm) == [("n1", "0"), ("n2", "0"), ("n2", "1")]
    tasks = [dict(labels) for name, labels in s if name == "gpuyard_task_memory_bytes"]
    assert tasks == [{"node": "n2", "tenant": "red"}]
    assert not [k for k in s if PRIVATE & dict(k[1]).keys()]
