"""Every node's own readings (issue 20): the DCGM and task series of `/metrics` and the idle-GPU
checks come from each node's agent (`engine.readings`), not from the server's host.

The real controller, store and app on the fake engine with two nodes that each report their own
GPU samples and task cgroups; a node that does not answer is left out (`scrape_up` 0). The
agent's side (NVML through the real pynvml over the fake NVML) runs in a subprocess.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from builders import make_node
from fake_engine import FakeEngine
from gpuyard.controller import Controller
from gpuyard.controller.gpureadings import GpuReadings
from gpuyard.model import IdleGpuAction, JobState, ManualClock, TaskReason, Tenant
from gpuyard.runtime.cgroups import CgroupUsage
from gpuyard.runtime.gpustats import GpuSample
from gpuyard.runtime.nodereadings import NodeReadings
from gpuyard.store import open_store
from metrics.conftest import Rig, scrape, scraper, value

WINDOW = 600


def real(node):
    """The node's GPUs as NVML would find them (not fake), so that readings count."""
    return replace(node, gpus=tuple(replace(g, fake=False) for g in node.gpus))


def sample(uuid: str, index: int, util: float) -> GpuSample:
    return GpuSample(index, uuid, "NVIDIA A100-SXM4-80GB", index, util, 1024.0, 80896.0, 50, 75)


def two_nodes(tmp_path: Path, action: IdleGpuAction = IdleGpuAction.STOP) -> Rig:
    """n1 with 1 GPU, n2 with 2: a 2-GPU job lands on n2, the second node."""
    clock = ManualClock(1_000_000.0)
    store = open_store(tmp_path / "db", clock=clock)
    store.tenants.create(
        Tenant("red", idle_gpu_action=action, idle_gpu_threshold_pct=10, idle_gpu_window_s=WINDOW)
    )
    engine = FakeEngine(real(make_node("n1", gpus=1)), real(make_node("n2", gpus=2)))
    engine.now = clock.now()
    readings = GpuReadings(engine, now=clock.now)
    ctl = Controller(store, engine, clock, stop_grace_s=5, gpu_utilization=readings.utilization)
    rig = Rig(store, engine, clock, ctl)
    rig.readings = readings  # type: ignore[attr-defined]
    return rig


def report(rig: Rig, util: dict[str, float]) -> None:
    """Each node reports its own GPUs at these utilisations, and its tasks' cgroups."""
    for node in rig.engine.nodes():
        keys = [k for k, n in rig.engine.node_of.items() if n == node.name]
        rig.engine.readings_of[node.name] = NodeReadings(
            tuple(sample(g.uuid, g.index, util.get(node.name, 0.0)) for g in node.gpus),
            {k: CgroupUsage(12.5, 300 << 20) for k in keys},
        )


@pytest.fixture
def rig(tmp_path: Path):
    r = two_nodes(tmp_path)
    yield r
    r.ctl.webhooks.stop()
    r.store.close()


def test_every_nodes_gpus_and_tasks_with_their_node(rig):
    job = rig.submit(gpus=2)
    (key,) = rig.start(job)
    assert rig.engine.node_of[key] == "n2"
    report(rig, {"n1": 80.0, "n2": 3.0})
    with scraper(rig.ctl) as client:
        s = scrape(client)
    util = value(s, "DCGM_FI_DEV_GPU_UTIL", node="n2", gpu="1")
    assert util == 3.0
    assert value(s, "DCGM_FI_DEV_GPU_UTIL", node="n2", gpu="1", job=job, tenant="red") == 3.0
    assert value(s, "DCGM_FI_DEV_GPU_UTIL", node="n1", Hostname="n1", gpu="0") == 80.0
    assert value(s, "gpuyard_task_memory_bytes", node="n2", job=job) == 300 << 20
    assert value(s, "gpuyard_node_scrape_up", node="n1") == 1
    assert value(s, "gpuyard_node_scrape_up", node="n2") == 1


def test_a_node_that_does_not_answer_is_left_out_and_marked(rig):
    job = rig.submit(gpus=2)
    rig.start(job)
    report(rig, {"n1": 80.0, "n2": 3.0})
    rig.engine.silent.add("n2")
    with scraper(rig.ctl) as client:
        s = scrape(client)
    assert value(s, "gpuyard_node_scrape_up", node="n2") == 0
    assert value(s, "gpuyard_node_up", node="n2") == 1  # alive, only its readings are missing
    n2 = [k for k in s if dict(k[1]).get("node") == "n2" and k[0].startswith("DCGM_")]
    assert n2 == [], "no stale value of a node that did not answer"
    assert not [k for k in s if k[0] == "gpuyard_task_memory_bytes"]
    assert value(s, "DCGM_FI_DEV_GPU_UTIL", node="n1") == 80.0


@pytest.mark.parametrize(
    ("header", "wait"),
    [("10", 2.0), ("1", 0.5), ("0.1", 0.1), ("0", 2.0), ("nan", 2.0), ("x", 2.0), (None, 2.0)],
)
def test_the_wait_for_the_nodes_is_half_the_scrapers_timeout(rig, header, wait):
    """Prometheus says its scrape timeout: a node that does not answer must cost its own
    series, never the whole scrape (at most 2 s, at least 0.1 s)."""
    headers = {"X-Prometheus-Scrape-Timeout-Seconds": header} if header is not None else {}
    with scraper(rig.ctl) as client:
        scrape(client, **headers)
    assert rig.engine.readings_waits[-1] == wait


def test_a_node_reports_only_its_own_tasks(rig):
    job = rig.submit(gpus=2)
    (key,) = rig.start(job)
    report(rig, {})
    # n1 claims n2's task: the store says it runs on n2, so n1's word is not taken
    rig.engine.readings_of["n1"] = NodeReadings((), {key: CgroupUsage(1.0, 1)})
    rig.engine.silent.add("n2")
    with scraper(rig.ctl) as client:
        s = scrape(client)
    assert not [k for k in s if k[0] == "gpuyard_task_memory_bytes"]


def test_an_idle_job_on_the_second_node_is_stopped(rig):
    job = rig.submit(gpus=2)
    (key,) = rig.start(job)
    for _ in range(WINDOW // 60 + 2):
        report(rig, {"n1": 90.0, "n2": 2.0})
        rig.clock.advance(60)
        rig.readings.refresh()
        rig.ctl.run_cycle()
    assert rig.engine.stopped.get(key) == 5
    (event,) = [e for e in rig.store.jobs.events(job) if e.reason == TaskReason.IDLE_GPU]
    assert "under 10%" in event.message
    assert rig.store.jobs.get(job).stop_requested == TaskReason.IDLE_GPU


def test_old_readings_of_a_silent_node_make_no_idle_job(rig):
    job = rig.submit(gpus=2)
    (key,) = rig.start(job)
    report(rig, {"n2": 2.0})
    rig.readings.refresh()
    rig.engine.silent.add("n2")  # it stops answering: its last readings age out
    for _ in range(WINDOW // 60 + 2):
        rig.clock.advance(60)
        rig.readings.refresh()
        rig.ctl.run_cycle()
    assert key not in rig.engine.stopped
    assert rig.store.jobs.get(job).state == JobState.RUNNING


def test_gpu_readings_by_uuid_fake_none():
    engine = FakeEngine(real(make_node("n1", gpus=1)), make_node("n2", gpus=1))
    engine.readings_of["n1"] = NodeReadings((sample("GPU-fake-n1-0", 0, 55.0),))
    readings = GpuReadings(engine)
    readings.refresh()
    (g1,) = engine.nodes()[0].gpus
    (g2,) = engine.nodes()[1].gpus
    assert readings.utilization(g1) == 55.0
    assert readings.utilization(g2) is None  # fake: never a reading


AGENT_CODE = """
import json
from gpuyard.engine import LocalEngine, NodeAgent
from gpuyard.runtime.executor import ContainerRuntime
from gpuyard.runtime.node import local_node

node = local_node("node-x", {fake!r})
engine = LocalEngine(NodeAgent(node, ContainerRuntime({root!r})))
out = engine.readings(2.0)["node-x"]
print(json.dumps([[s.uuid, s.util_pct] for s in out.gpus]))
engine.close()
"""
GPUS = "NVIDIA A100-SXM4-80GB|GPU-x0|81920|0|42;NVIDIA A100-SXM4-80GB|GPU-x1|81920|1|7"


def test_the_agent_reads_its_own_nvml(with_fake_nvml, tmp_path):
    code = AGENT_CODE.format(fake=None, root=str(tmp_path))
    out, _ = with_fake_nvml(code, FAKE_NVML_GPUS=GPUS)
    assert out == [["GPU-x0", 42.0], ["GPU-x1", 7.0]]


def test_declared_gpus_are_not_sampled_where_nvml_answers(with_fake_nvml, tmp_path):
    code = AGENT_CODE.format(fake="2xA100-80GB", root=str(tmp_path))
    out, _ = with_fake_nvml(code, FAKE_NVML_GPUS=GPUS)
    assert out == []
