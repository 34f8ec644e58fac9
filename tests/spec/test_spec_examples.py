"""Every file in examples/ is a valid spec, with the shape its comment promises."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuyard.model.demand import GpuShare
from gpuyard.spec import job_demand, load_job_spec, parse_job_spec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

EXPECTED = [
    # (file, name, roles with their task counts, total GPUs, image, retryCount)
    ("hello.yaml", "hello", {"main": 1}, 0, None, 0),
    ("two-roles.yaml", "two-roles", {"ps": 1, "worker": 2}, 2, None, 0),
    ("openpai-v2.yaml", "cifar10-demo", {"ps": 1, "worker": 2}, 2, "python:3.11-slim", 1),
    ("fail-exit3.yaml", "fail-exit3", {"main": 1}, 0, None, 2),
    ("shared-gpu.yaml", "shared-gpu", {"infer": 2}, 0, None, 0),  # shares, no whole GPU
    ("distributed.yaml", "distributed", {"worker": 2}, 2, None, 0),
    ("jupyter.yaml", "jupyter", {"main": 1}, 1, "quay.io/jupyter/base-notebook:latest", 0),
]


def test_every_example_is_listed():
    assert sorted(p.name for p in EXAMPLES.glob("*.yaml")) == sorted(e[0] for e in EXPECTED)


@pytest.mark.parametrize(("file", "name", "roles", "gpus", "image", "retries"), EXPECTED)
def test_example(file, name, roles, gpus, image, retries):
    spec = load_job_spec((EXAMPLES / file).read_bytes(), "application/yaml")
    assert spec.name == name
    assert {r: role.task_number for r, role in spec.task_roles.items()} == roles
    assert list(spec.task_roles) == list(roles)
    assert (spec.total_gpus, spec.image, spec.retry_count) == (gpus, image, retries)
    assert parse_job_spec(spec.to_document()) == spec


@pytest.mark.parametrize("file", [e[0] for e in EXPECTED])
def test_example_fits_a_small_dev_box_with_4_fake_gpus(file):
    demand = job_demand(load_job_spec((EXAMPLES / file).read_text()), "j", 1)
    assert demand.total.gpus <= 4
    assert demand.total.cpu <= 2  # a 2-CPU VM runs every example
    assert all(task.resources.memory_mb <= 1024 for task in demand.tasks)


def test_two_roles_checks_data_and_output():
    spec = load_job_spec((EXAMPLES / "two-roles.yaml").read_text())
    assert spec.data_dir and spec.output_dir
    for role in spec.task_roles.values():
        assert "/data" in role.command and "/output" in role.command


def test_fail_exit3_exits_3():
    spec = load_job_spec((EXAMPLES / "fail-exit3.yaml").read_text())
    assert "exit 3" in spec.task_roles["main"].command


def test_openpai_example_substitutes_its_parameters():
    spec = load_job_spec((EXAMPLES / "openpai-v2.yaml").read_text())
    commands = "\n".join(r.command for r in spec.task_roles.values())
    assert "<%" not in commands
    assert "range(3)" in commands


def test_shared_gpu_asks_memory_and_compute_of_one_gpu():
    spec = load_job_spec((EXAMPLES / "shared-gpu.yaml").read_text())
    demand = job_demand(spec, "j", 1)
    shares = {task.gpu_share for task in demand.tasks}
    assert shares == {GpuShare(memory_mb=20000, compute_percent=50)}


def test_jupyter_serves_its_notebook_below_the_platforms_path():
    spec = load_job_spec((EXAMPLES / "jupyter.yaml").read_text())
    (service,) = spec.services
    assert (service.name, service.port, service.strip_prefix) == ("notebook", 8888, False)
    command = spec.task_roles["main"].command
    assert "--port=8888" in command and "--ip=127.0.0.1" in command
    assert '--ServerApp.base_url="/jobs/${GPUYARD_JOB_ID}/services/notebook/"' in command
