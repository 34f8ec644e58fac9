"""GPU service from the task rows (budgets, LAS): a whole GPU counts one, a shared task the
part of its GPU's memory it holds; a GPU the store does not know counts whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from builders import make_node
from gpuyard.model import ManualClock
from gpuyard.spec import parse_job_spec
from gpuyard.store import NewJob, NewTask, open_store

HOUR = 3600.0


@pytest.mark.parametrize(
    ("node", "gpus", "gpu_memory_mb", "gpu_hours"),
    [
        ("n1", (0, 1), 0, 2.0),  # two whole GPUs
        ("n1", (2,), 20480, 0.25),  # a quarter of an 81,920 MB GPU
        ("n1", (3,), 81920, 1.0),
        ("gone", (0,), 20480, 1.0),  # a node the store does not know: counted whole
    ],
)
def test_gpu_hours_of_one_task(tmp_path: Path, node, gpus, gpu_memory_mb, gpu_hours):
    clock = ManualClock(1000.0)
    store = open_store(tmp_path, clock=clock)
    store.nodes.record([make_node("n1", gpus=4)], "local")
    spec = parse_job_spec({"name": "s", "taskRoles": {"w": {"command": "x", "gpuNumber": 1}}})
    job = store.jobs.submit(NewJob("s", "default", 0, 0, spec.to_document()))
    [task] = store.jobs.bind(job.id, 1, [NewTask("w", 0, node, gpus, 500, 256, gpu_memory_mb)])
    assert store.jobs.task_running(task.id, 1000.0)
    now = 1000.0 + HOUR
    assert store.usage.by_tenant(0.0, now)["default"] == pytest.approx(gpu_hours * HOUR)
    assert store.usage.attained_by_job([job.id], now)[job.id] == pytest.approx(gpu_hours * HOUR)
