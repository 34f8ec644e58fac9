"""A GPU that NVML reports unhealthy leaves scheduling and is listed so, with its cause."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from builders import make_node
from fake_engine import FakeEngine
from gpuyard.api.services.nodes import node_list
from gpuyard.controller import Controller
from gpuyard.model import JobState, ManualClock
from gpuyard.spec import parse_job_spec
from gpuyard.store import NewJob, Store, open_store


def submit(store: Store, gpus: int) -> str:
    spec = parse_job_spec({"name": "t", "taskRoles": {"w": {"gpuNumber": gpus, "command": "x"}}})
    job = NewJob(spec.name, spec.tenant, spec.priority, spec.retry_count, spec.to_document())
    return store.jobs.submit(job).id


def test_unhealthy_gpus_are_never_placed_and_are_shown_with_their_cause(tmp_path: Path):
    node = make_node("n1", gpus=4)
    broken = replace(node.gpus[1], healthy=False, health_cause="XID 79")
    node = replace(node, gpus=(node.gpus[0], broken, *node.gpus[2:]))
    clock = ManualClock(1_000_000.0)
    store = open_store(tmp_path, clock=clock)
    engine = FakeEngine(node)
    ctl = Controller(store, engine, clock)
    four, three = submit(store, 4), submit(store, 3)
    ctl.run_cycle()
    assert store.jobs.get(four).state == JobState.QUEUED
    assert store.jobs.get(three).state == JobState.SCHEDULED
    (task,) = store.jobs.tasks(three)
    assert sorted(task.gpus) == [0, 2, 3]
    (listed,) = node_list(ctl, None).nodes
    states = [(g.state, g.health_cause) for g in listed.gpus]
    assert states == [("used", None), ("unhealthy", "XID 79"), ("used", None), ("used", None)]
