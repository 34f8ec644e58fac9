"""Idle GPUs through the real controller on the fake engine: a utilisation reader injected in
the constructor, time driven by a ManualClock."""

from __future__ import annotations

import pytest

from gpuyard.model import IdleGpuAction, JobState, TaskReason, Tenant
from metrics.conftest import make_rig, scrape, scraper, value

WINDOW = 600


def tenant(action: IdleGpuAction) -> Tenant:
    return Tenant(
        "red", idle_gpu_action=action, idle_gpu_threshold_pct=10, idle_gpu_window_s=WINDOW
    )


@pytest.fixture
def make(tmp_path):
    rigs = []

    def build(action: IdleGpuAction, real_gpus: bool = True):
        rig = make_rig(tmp_path / str(len(rigs)), [tenant(action)], real_gpus=real_gpus)
        rigs.append(rig)
        return rig

    yield build
    for rig in rigs:
        rig.store.close()


def run_idle(rig, util, seconds, step=60):
    for g in rig.engine.nodes()[0].gpus:
        rig.util[g.uuid] = util
    for _ in range(seconds // step):
        rig.clock.advance(step)
        rig.ctl.run_cycle()


def idle_events(rig, job_id):
    return [e for e in rig.store.jobs.events(job_id) if e.reason == TaskReason.IDLE_GPU]


def test_flag_after_the_window_once(make):
    rig = make(IdleGpuAction.FLAG)
    job = rig.submit(gpus=2)
    rig.start(job)
    run_idle(rig, 3.0, WINDOW - 60)
    assert idle_events(rig, job) == []
    run_idle(rig, 3.0, 180)
    (event,) = idle_events(rig, job)
    assert event.from_state == event.to_state == "RUNNING"
    assert "under 10%" in event.message
    assert rig.ctl.idle_jobs() == {job: "red"}
    assert rig.store.jobs.get(job).state == JobState.RUNNING


def test_flag_shows_in_metrics_and_clears_when_busy(make):
    rig = make(IdleGpuAction.FLAG)
    job = rig.submit(gpus=1)
    rig.start(job)
    run_idle(rig, 0.0, WINDOW + 60)
    with scraper(rig.ctl) as client:
        s = scrape(client)
        assert value(s, "gpuyard_job_idle_gpu", job=job, tenant="red") == 1
        assert value(s, "gpuyard_idle_gpu_jobs_total", tenant="red", action="flag") == 1
        run_idle(rig, 55.0, 60)
        assert "gpuyard_job_idle_gpu" not in {name for name, _ in scrape(client)}
    assert rig.ctl.idle_jobs() == {}


def test_one_busy_gpu_keeps_the_job_busy(make):
    rig = make(IdleGpuAction.STOP)
    job = rig.submit(gpus=2)
    rig.start(job)
    gpus = rig.engine.nodes()[0].gpus
    rig.util[gpus[0].uuid], rig.util[gpus[1].uuid] = 0.0, 80.0
    for _ in range(20):
        rig.clock.advance(60)
        rig.ctl.run_cycle()
    assert idle_events(rig, job) == []


def test_stop_is_a_stop_not_retried(make):
    rig = make(IdleGpuAction.STOP)
    job = rig.submit(gpus=1, retryCount=3)
    (key,) = rig.start(job)
    run_idle(rig, 1.0, WINDOW + 60)
    assert key in rig.engine.stopped
    rig.engine.exit(key, 143, "Signal(SIGTERM)")
    rig.ctl.run_cycle()
    done = rig.store.jobs.get(job)
    assert done.state == JobState.STOPPED and done.reason == TaskReason.IDLE_GPU
    assert done.attempt == 1


def test_fake_gpus_are_never_flagged(make):
    rig = make(IdleGpuAction.STOP, real_gpus=False)
    job = rig.submit(gpus=1)
    rig.start(job)
    run_idle(rig, 0.0, 3 * WINDOW)  # the reader, like NVML's, has nothing for fake GPUs
    assert idle_events(rig, job) == [] and rig.ctl.idle_jobs() == {}


def test_off_is_not_watched(make):
    rig = make(IdleGpuAction.OFF)
    job = rig.submit(gpus=1)
    rig.start(job)
    run_idle(rig, 0.0, 3 * WINDOW)
    assert idle_events(rig, job) == []


def test_tenant_idle_settings_through_the_api(client):
    """The idle policy is a tenant setting like the others: read, written, validated."""
    store = client.app.state.controller.store
    store.users.create("root", "admin", [])
    token = store.tokens.create("root", "test").secret
    auth = {"Authorization": f"Bearer {token}"}
    red = client.get("/api/v1/tenants/red", headers=auth).json()
    assert (red["idleGpuAction"], red["idleGpuThresholdPct"], red["idleGpuWindowS"]) == (
        "flag",
        5.0,
        1800,
    )
    bad = client.patch(
        "/api/v1/tenants/red", json={"idleGpuThresholdPct": 120, "idleGpuWindowS": 5}, headers=auth
    )
    assert bad.status_code == 422
    assert {e["path"] for e in bad.json()["errors"]} == {"idleGpuThresholdPct", "idleGpuWindowS"}
    ok = client.patch("/api/v1/tenants/red", json={"idleGpuAction": "stop"}, headers=auth)
    assert ok.status_code == 200, ok.text
    assert ok.json()["idleGpuAction"] == "stop"
