"""Pre-pulls on the real controller and store: the queue heads' images are warmed on the nodes
they fit, most free GPUs of their type first, by the pre-puller's thread (never in the cycle),
once per node and image; a task's start event says when its image was present."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from builders import make_node
from fake_images import ImageEngine
from gpuyard.controller import Controller
from gpuyard.controller.loop import start_event_note
from gpuyard.controller.prepull import Warm, warm_targets
from gpuyard.model import ManualClock
from gpuyard.runtime.imagewarm import PULLING
from gpuyard.spec import parse_job_spec
from gpuyard.store import NewJob, open_store


def job(store, name: str, gpus: int, image: str | None = None, tasks: int = 1) -> str:
    doc: dict[str, Any] = {"name": name, "taskRoles": {"main": {
        "command": "true", "gpuNumber": gpus, "taskNumber": tasks}}}
    if image:
        doc["image"] = image
    spec = parse_job_spec(doc)
    return store.jobs.submit(NewJob(spec.name, spec.tenant, 0, 0, spec.to_document())).id


def test_warm_targets_pick_the_nodes_with_free_gpus_of_the_flavor_first() -> None:
    nodes = [make_node("a", gpus=2), make_node("b", gpus=4), make_node("c", gpus=8, gpu_type="V100")]
    spec = parse_job_spec({"name": "j", "image": "reg/x:1", "taskRoles": {
        "main": {"command": "true", "gpuNumber": 2, "gpuType": "A100-80GB", "taskNumber": 1},
        "side": {"command": "true", "image": "reg/y:1", "taskNumber": 3}}})
    host = parse_job_spec({"name": "h", "taskRoles": {"main": {"command": "true"}}})
    assert warm_targets([spec, host], nodes, []) == [
        Warm("b", "reg/x:1"), Warm("c", "reg/y:1"), Warm("b", "reg/y:1"), Warm("a", "reg/y:1")]


def test_a_queued_jobs_image_is_warmed_off_the_cycle_once_and_the_start_says_present(
    tmp_path: Path,
) -> None:
    clock = ManualClock(1_000_000.0)
    store = open_store(tmp_path, clock=clock)
    engine = ImageEngine(make_node("n1", gpus=2), make_node("n2", gpus=2))
    ctl = Controller(store, engine, clock)
    assert ctl.prepull is not None
    blockers = [job(store, f"hog{i}", 2) for i in range(2)]
    ctl.run_cycle()  # both nodes full
    waiting = job(store, "waits", 2, image="reg.example/app:1")
    clock.advance(10)
    ctl.run_cycle()
    assert engine.warms == []  # nothing asked of a node in the cycle
    ctl.prepull.start()
    try:
        deadline = time.monotonic() + 10
        while len(engine.warms) < 1:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        for _ in range(3):
            clock.advance(10)
            ctl.run_cycle()
        time.sleep(0.3)
    finally:
        ctl.prepull.stop()
    assert sorted(w[:2] for w in engine.warms) == [("n1", "reg.example/app:1")]  # asked once
    assert threading.main_thread().name not in {w[2] for w in engine.warms}  # not the cycle's
    assert ctl.prepull.where("reg.example/app:1") == {"n1": PULLING}
    for key in engine.keys_on(blockers[0]):
        engine.exit(key, 0, "Completed")
    clock.advance(10)
    ctl.run_cycle()
    ctl.run_cycle()
    (key,) = engine.keys_on(waiting)
    engine.run(key)
    ctl.run_cycle()
    started = [e for e in store.jobs.events(waiting) if e.to_state == "RUNNING" and e.task]
    assert [e.message for e in started] == ["image present"]


def test_the_start_event_note() -> None:
    assert start_event_note("image present") == "image present"
    assert start_event_note("pulling image a:1") == "after pulling image a:1"
    assert start_event_note(None) is None
