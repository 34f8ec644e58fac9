"""A job's preemption count and what its estimated start rests on, through the real API (the
job, the job list and the queue) and the portal (the job and tenants pages): a run time
learned from the user's earlier run of the same job name, or a running job's maxRuntime."""

from __future__ import annotations

import pytest

from api.conftest import spec
from gpuyard.api.schemas import iso

RAN_S = 600


def gpus(n: int, tenant: str, name: str, extra: str = "") -> str:
    return spec(tenant, name, extra).replace("gpuNumber: 1", f"gpuNumber: {n}")


def run(world, job_id: str) -> str:
    """Bind (if needed) and run the job's task; its key."""
    world.ctl.run_cycle()
    key = world.engine.keys_on(job_id)[-1]
    world.engine.now = world.clock.now()
    world.engine.run(key)
    world.ctl.run_cycle()
    return key


def get(world, job_id: str) -> dict:
    return world.call("root", "GET", f"/api/v1/jobs/{job_id}").json()


def portal(world, path: str) -> str:
    r = world.client.get(path, headers={"Cookie": f"gpuyard_session={world.tokens['alice']}"})
    assert r.status_code == 200, r.text
    return r.text


def test_a_preempted_job_says_how_many_times(world):
    job_id = world.jobs["red"]
    key = run(world, job_id)
    world.ctl.preempt(job_id, grace_s=1)
    world.engine.exit(key, 0, "Completed")
    world.ctl.run_cycle()
    assert get(world, job_id)["preemptions"] == 1
    listed = {j["id"]: j for j in world.call("alice", "GET", "/api/v1/jobs").json()["jobs"]}
    assert listed[job_id]["preemptions"] == 1
    assert get(world, world.jobs["blue"])["preemptions"] == 0
    assert 'id="preemptions">1 time<' in portal(world, f"/jobs/{job_id}")


@pytest.mark.parametrize(
    ("extra", "basis"),
    [
        pytest.param("", "1 learned from history", id="learned"),
        pytest.param(f"maxRuntime: {RAN_S * 2}s\n", "1 by maxRuntime", id="max-runtime"),
    ],
)
def test_the_estimated_start_says_what_it_rests_on(world, extra, basis):
    key = run(world, world.jobs["red"])  # alice's red-job: 1 GPU, 600 s, succeeds
    world.clock.advance(RAN_S)
    world.engine.now = world.clock.now()
    world.engine.exit(key, 0, "Completed")
    world.ctl.run_cycle()
    again = world.submit("alice", gpus(3, "red", "red-job", extra)).json()["id"]
    run(world, again)  # with bob's blue-job, the 4 GPUs are taken
    started = world.clock.now()
    waiting = world.submit("alice", gpus(2, "red", "eval")).json()["id"]
    world.ctl.run_cycle()
    job = get(world, waiting)
    ends = RAN_S if not extra else RAN_S * 2
    assert job["estimatedStart"] == iso(started + ends)
    assert job["estimatedStartBasis"] == f"the run times of 1 running job: {basis}"
    assert f"(from {job['estimatedStartBasis']})" in job["pendingReason"]
    queue = world.call("alice", "GET", "/api/v1/queue").json()
    (red,) = [t for t in queue["tenants"] if t["name"] == "red"]
    assert red["queue"][0]["estimatedStartBasis"] == job["estimatedStartBasis"]
    shown = f"from {job['estimatedStartBasis']}</span>"
    assert shown in portal(world, f"/jobs/{waiting}") and shown in portal(world, "/tenants")
