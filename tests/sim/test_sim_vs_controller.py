"""The simulator and the live controller make the same decisions on the same workload.

The real `Controller` (store, scheduler) runs on `FakeEngine` with a `ManualClock`; the test
plays the simulator's role of the world: at each instant, tasks that reached their duration
exit, jobs that arrive are submitted, and one controller cycle runs. Starts and placements
must equal the simulator's.
"""

from __future__ import annotations

from pathlib import Path

from fake_engine import FakeEngine
from gpuyard.controller import Controller
from gpuyard.model import ManualClock
from gpuyard.sim import SimConfig, Trace, TraceJob, simulate
from gpuyard.sim.cluster import build_nodes, build_tenants
from gpuyard.spec import parse_job_spec
from gpuyard.store import NewJob, open_store

FLAVOR = "A100-80GB"
JOBS = [  # id, submit, duration, gpus, tenant
    ("j0", 0, 300, 4, "a"),
    ("j1", 0, 100, 2, "b"),
    ("j2", 10, 200, 4, "b"),
    ("j3", 20, 50, 1, "a"),
    ("j4", 30, 400, 8, "a"),
    ("j5", 40, 60, 2, "b"),
    ("j6", 150, 100, 1, "a"),
]
TRACE = Trace(
    "same",
    tuple(TraceJob(*j, gpu_type=FLAVOR) for j in JOBS),
    {("a", FLAVOR): 1, ("b", FLAVOR): 1},
    gpus_per_node=4,
)


def placements(pairs) -> tuple:
    return tuple(sorted((node, tuple(gpus)) for node, gpus in pairs))


def run_controller(tmp_path: Path) -> dict[str, tuple[float, tuple]]:
    clock = ManualClock(0.0)
    store = open_store(tmp_path, clock=clock)
    for tenant in build_tenants(TRACE, SimConfig().tenant_queue, SimConfig().grace_s).values():
        store.tenants.create(tenant)
    engine = FakeEngine(*build_nodes(TRACE))
    ctl = Controller(store, engine, clock)
    store_id: dict[str, str] = {}
    started: dict[str, tuple[float, tuple]] = {}
    ends: dict[str, float] = {}
    times = sorted({j[1] for j in JOBS})
    while times:
        t = times.pop(0)
        clock.set(t)
        engine.now = t
        for name, end in ends.items():
            if end == t:
                for key in engine.keys_on(store_id[name]):
                    engine.exit(key, 0, "Completed")
        for name, submit, _, gpus, tenant in JOBS:
            if submit == t:
                store_id[name] = submit_job(store, name, gpus, tenant)
        ctl.run_cycle()
        for name, _, duration, _, _ in JOBS:
            keys = engine.keys_on(store_id[name]) if name in store_id else []
            if keys and name not in started:
                for key in keys:
                    engine.run(key)
                started[name] = (
                    t,
                    placements(
                        (engine.node_of[k], [g.index for g in engine.launched[k].gpus])
                        for k in keys
                    ),
                )
                ends[name] = t + duration
                times = sorted(set(times) | {t + duration})
    return started


def submit_job(store, name: str, gpus: int, tenant: str) -> str:
    per_task = min(gpus, 4)
    doc = {
        "name": name,
        "tenant": tenant,
        "taskRoles": {
            "worker": {"taskNumber": gpus // per_task, "gpuNumber": per_task, "command": "true"}
        },
    }
    spec = parse_job_spec(doc)
    job = NewJob(spec.name, spec.tenant, spec.priority, spec.retry_count, spec.to_document())
    return store.jobs.submit(job).id


def test_same_starts_and_placements_as_the_controller(tmp_path):
    result = simulate(TRACE, SimConfig(policy="default"))
    sim = {
        j.trace.job_id: (j.first_start, placements((t.node, t.gpu_indices) for t in j.placement))
        for j in result.jobs
    }
    live = run_controller(tmp_path)
    assert live == sim
    assert sim["j4"][0] > 30  # the workload does queue
