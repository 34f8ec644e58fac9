"""Priority classes on the real controller and store (fake cluster): an OpenPAI job with
HiveD's `jobPriorityClass: oppo` runs on idle capacity as opportunistic, and another
tenant's job that needs the capacity stops it though it could neither reclaim nor demote."""

from __future__ import annotations

from builders import make_node
from fake_engine import FakeEngine
from gpuyard.controller import Controller
from gpuyard.model import FlavorQuota, JobState, Tenant
from gpuyard.spec import parse_job_spec
from gpuyard.store import NewJob, Store


def submit(store: Store, doc: dict) -> str:
    spec = parse_job_spec(doc)
    job = NewJob(spec.name, spec.tenant, spec.priority, spec.retry_count, spec.to_document())
    return store.jobs.submit(job).id


def openpai_oppo(tenant: str, gpus: int) -> dict:
    return {
        "protocolVersion": 2,
        "name": "scavenger",
        "type": "job",
        "defaults": {"virtualCluster": tenant},
        "taskRoles": {
            "main": {
                "instances": 1,
                "resourcePerInstance": {"cpu": 1, "memoryMB": 256, "gpu": gpus},
                "commands": ["train"],
            }
        },
        "extras": {"hivedScheduler": {"jobPriorityClass": "oppo"}},
    }


def test_an_oppo_job_runs_on_idle_capacity_and_is_stopped_for_another_tenants_job(store, clock):
    engine = FakeEngine(make_node("n1", gpus=4))
    ctl = Controller(store, engine, clock)
    store.tenants.create(Tenant("a"))  # no guarantee: its jobs only ever borrow
    store.tenants.create(Tenant("b", quotas=(FlavorQuota("A100-80GB", 4),)))
    oppo = submit(store, openpai_oppo("b", 4))
    ctl.run_cycle()
    (key,) = engine.keys_on(oppo)
    engine.run(key)
    ctl.run_cycle()
    assert store.jobs.get(oppo).opportunistic  # within b's guarantee, yet opportunistic
    doc = {"name": "t", "tenant": "a", "taskRoles": {"w": {"gpuNumber": 1, "command": "true"}}}
    normal = submit(store, doc)
    ctl.run_cycle()
    assert key in engine.stopped
    assert store.jobs.get(normal).pending_code == "WaitingForPreemption"
    engine.exit(key, 143, "Signal(SIGTERM)")
    ctl.run_cycle()
    ctl.run_cycle()
    assert store.jobs.get(normal).state == JobState.SCHEDULED
    again = store.jobs.get(oppo)  # back in the queue, uncounted, until 4 GPUs are idle
    assert (again.state, again.attempt, again.retries_used) == (JobState.QUEUED, 2, 0)
