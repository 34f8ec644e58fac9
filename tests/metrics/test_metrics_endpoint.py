"""`/metrics` through the real API: jobs, tenants (the queue view's numbers), nodes, GPUs
(fake ones marked, with no DCGM readings), histograms; who may scrape (the scrape token, a
platform admin), and what an open /metrics shows (no job labels)."""

from __future__ import annotations

from gpuyard.store import Membership, PlatformRole, TenantRole
from metrics.conftest import parse, scrape, value


def test_jobs_by_tenant_and_state(rig, client):
    rig.submit("red")
    rig.submit("blue")
    rig.submit("blue")
    s = scrape(client)
    assert value(s, "gpuyard_jobs", tenant="blue", state="QUEUED") == 2
    assert value(s, "gpuyard_jobs", tenant="red", state="QUEUED") == 1
    assert value(s, "gpuyard_jobs", tenant="red", state="FAILED") == 0
    assert value(s, "gpuyard_queue_length", tenant="blue") == 2


def test_tenant_gpus_are_the_queue_views_numbers(rig, client):
    red = rig.submit("red", gpus=3)  # 1 guaranteed, 2 borrowed from blue's unused 3
    rig.start(red)
    s = scrape(client)
    queue = {
        t["name"]: {f["flavor"]: f for f in t["flavors"]} for t in rig_queue(rig, client)["tenants"]
    }
    for tenant in ("red", "blue"):
        shares = queue[tenant]["A100-80GB"]
        for column in ("guaranteed", "used", "borrowed", "lent"):
            got = value(s, f"gpuyard_tenant_gpus_{column}", tenant=tenant, flavor="A100-80GB")
            assert got == shares[column], (tenant, column)
    assert value(s, "gpuyard_tenant_gpus_borrowed", tenant="red") == 2
    assert value(s, "gpuyard_tenant_gpus_lent", tenant="blue") == 2


def rig_queue(rig, client):
    rig.store.users.create("root", "admin", [])
    token = rig.store.tokens.create("root", "test").secret
    r = client.get("/api/v1/queue", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200, r.text
    return r.json()


def test_node_and_fake_gpu_allocation(rig, client):
    job = rig.submit("red", gpus=2)
    rig.start(job)
    s = scrape(client)
    assert value(s, "gpuyard_node_up", node="n1") == 1
    assert value(s, "gpuyard_node_cpu_cores", node="n1") == 32
    assert value(s, "gpuyard_node_cpu_allocated_cores", node="n1") == 1
    held = [
        dict(labels)
        for (name, labels), v in s.items()
        if name == "gpuyard_gpu_allocated" and v == 1
    ]
    assert len(held) == 2
    assert all(h["fake"] == "true" and h["job"] == job and h["tenant"] == "red" for h in held)
    free = value(s, "gpuyard_gpu_allocated", node="n1", gpu="3")
    assert free == 0
    assert not [k for k in s if k[0].startswith("DCGM_")], "fake GPUs have no DCGM readings"


def test_a_node_seen_before_but_gone_is_down(rig, client):
    rig.ctl.run_cycle()  # records n1
    rig.engine.lose_node("n1")
    assert value(scrape(client), "gpuyard_node_up", node="n1") == 0


def test_queueing_delay_and_cycle_histograms(rig, client):
    job = rig.submit("red")
    rig.clock.advance(42)
    rig.start(job)
    s = scrape(client)
    assert value(s, "gpuyard_job_queueing_delay_seconds_count", tenant="red") == 1
    assert value(s, "gpuyard_job_queueing_delay_seconds_sum", tenant="red") == 42
    assert value(s, "gpuyard_job_queueing_delay_seconds_bucket", tenant="red", le="30.0") == 0
    assert value(s, "gpuyard_job_queueing_delay_seconds_bucket", tenant="red", le="60.0") == 1
    assert value(s, "gpuyard_controller_cycle_seconds_count") == rig.ctl.cycles
    assert value(s, "gpuyard_scheduling_cycle_seconds_count") >= 1


def test_job_ends_are_counted(rig, client):
    job = rig.submit("red")
    (key,) = rig.start(job)
    rig.engine.exit(key, 3, "Error(exit 3)")
    rig.ctl.run_cycle()
    s = scrape(client)
    assert value(s, "gpuyard_jobs_finished_total", tenant="red", state="FAILED") == 1
    assert value(s, "gpuyard_jobs", tenant="red", state="FAILED") == 1


def test_preemptions_by_tenant_and_per_job(rig, client):
    job = rig.submit("red")
    for _ in range(2):
        (key,) = rig.start(job)[-1:]
        rig.ctl.preempt(job, grace_s=1)
        rig.engine.exit(key, 0, "Completed")
        rig.ctl.run_cycle()  # requeued, and bound again
    s = scrape(client)
    assert value(s, "gpuyard_job_preemptions_total", tenant="red") == 2
    assert value(s, "gpuyard_job_preempted_times", job=job, tenant="red") == 2


def test_budget_used_and_budget(rig, client):
    job = rig.submit("blue", gpus=2)
    rig.start(job)
    rig.clock.advance(1800)
    s = scrape(client)
    assert value(s, "gpuyard_tenant_gpu_hour_budget", tenant="blue") == 100
    assert value(s, "gpuyard_tenant_gpu_hours_used", tenant="blue") == 1.0


def test_scrape_token(rig, client):
    client.app.state.metrics_token = "s3cret"
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer nope"}).status_code == 401
    scrape(client, Authorization="Bearer s3cret")


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_a_platform_admin_may_scrape_a_member_may_not(rig, client):
    rig.store.users.create("boss", PlatformRole.ADMIN)
    rig.store.users.create("alice", PlatformRole.USER, [Membership("red", TenantRole.MEMBER)])
    boss = rig.store.tokens.create("boss", "t").secret
    alice = rig.store.tokens.create("alice", "t").secret
    client.app.state.metrics_token = None  # no scrape token yet: admins only
    assert client.get("/metrics", headers=bearer(boss)).status_code == 200
    r = client.get("/metrics", headers=bearer(alice))
    assert r.status_code == 403 and "platform admins" in r.json()["detail"]
    assert client.get("/metrics", headers=bearer("gy_nope")).status_code == 401


def test_an_open_metrics_names_no_job_and_sums_by_tenant(rig, client):
    job = rig.submit("blue", gpus=2)
    rig.start(job)
    client.app.state.metrics_open = True
    r = client.get("/metrics", headers=bearer("anything"))
    assert r.status_code == 200
    s = parse(r.text)
    assert job not in r.text
    assert not [name for name, labels in s if {"job", "task"} & dict(labels).keys()]
    held = [
        v for (n, ls), v in s.items() if n == "gpuyard_gpu_allocated" and ("tenant", "blue") in ls
    ]
    assert sum(held) == 2
    assert value(s, "gpuyard_jobs", tenant="blue", state="RUNNING") == 1
