"""A shared-GPU task's placement survives the store (migration 0006) and comes back to the
scheduler as the same shared placement."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from gpuyard.controller.view import task_placement
from gpuyard.model import ManualClock, Resources, TaskPlacement
from gpuyard.spec import parse_job_spec
from gpuyard.store import NewJob, NewTask, open_store


@pytest.mark.parametrize(
    ("gpus", "gpu_memory_mb", "placement"),
    [
        ((2,), 30000, TaskPlacement("w", 0, "n1", (2,), Resources(500, 256, 0), 30000)),
        ((0, 1), 0, TaskPlacement("w", 0, "n1", (0, 1), Resources(500, 256, 2), 0)),
    ],
)
def test_shared_placement_round_trip(tmp_path: Path, gpus, gpu_memory_mb, placement):
    store = open_store(tmp_path, clock=ManualClock(100.0))
    spec = parse_job_spec({"name": "s", "taskRoles": {"w": {"command": "x", "gpuMemoryMB": 30000}}})
    job = store.jobs.submit(NewJob("s", "default", 0, 0, spec.to_document()))
    assert parse_job_spec(store.jobs.get(job.id).spec) == spec  # the ask is in the spec
    [task] = store.jobs.bind(job.id, 1, [NewTask("w", 0, "n1", gpus, 500, 256, gpu_memory_mb)])
    assert task.gpu_memory_mb == gpu_memory_mb
    assert task_placement(task) == placement
    scheduled = [e.message or "" for e in store.jobs.events(job.id) if e.to_state == "SCHEDULED"]
    assert ("GPU 2 (shared, 30000 MB)" in scheduled[0]) == bool(gpu_memory_mb), scheduled


def test_migration_0006_adds_the_column(tmp_path: Path):
    store = open_store(tmp_path)
    columns = {c["name"]: c for c in sa.inspect(store.engine).get_columns("tasks")}
    assert "gpu_memory_mb" in columns
    with store.engine.connect() as conn:
        version = conn.execute(sa.text("select version_num from alembic_version")).scalar()
    assert version >= "0006"  # this migration or a later one is the head
