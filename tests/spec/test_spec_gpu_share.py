"""Shared-GPU asks in the spec: gpuMemoryMB, a fractional gpuNumber, gpuComputePercent."""

from __future__ import annotations

import pytest
from spec_docs import role_doc

from gpuyard.model import GpuShare
from gpuyard.spec import job_demand, parse_job_spec


@pytest.mark.parametrize(
    ("fields", "gpu_number", "memory", "compute", "share"),
    [
        ({"gpuMemoryMB": 20000}, 0, 20000, None, GpuShare(memory_mb=20000)),
        ({"gpuMemoryMB": "20G"}, 0, 20480, None, GpuShare(memory_mb=20480)),
        ({"gpuNumber": 0.5}, 0.5, None, None, GpuShare(milli=500)),
        ({"gpuNumber": "0.25"}, 0.25, None, None, GpuShare(milli=250)),
        ({"gpuNumber": 0.33333}, 0.333, None, None, GpuShare(milli=333)),
        (
            {"gpuNumber": 0.5, "gpuComputePercent": 30},
            0.5,
            None,
            30,
            GpuShare(milli=500, compute_percent=30),
        ),
        ({"gpuMemoryMB": 1000, "gpuNumber": 0}, 0, 1000, None, GpuShare(memory_mb=1000)),
        ({"gpuNumber": 1.0}, 1, None, None, None),  # 1.0 is one whole GPU
        ({"gpuNumber": 2}, 2, None, None, None),
    ],
)
def test_gpu_share_is_read_and_reaches_the_demand(fields, gpu_number, memory, compute, share):
    spec = parse_job_spec(role_doc(taskNumber=2, gpuType="A100", **fields))
    role = spec.task_roles["worker"]
    assert (role.gpu_number, role.gpu_memory_mb, role.gpu_compute_percent) == (
        gpu_number,
        memory,
        compute,
    )
    assert type(role.gpu_number) is type(gpu_number)
    tasks = job_demand(spec, "j", 1).tasks
    assert [t.gpu_share for t in tasks] == [share, share]
    assert all(t.gpu_type == "A100" for t in tasks)
    whole = 0 if share else gpu_number
    assert [t.resources.gpus for t in tasks] == [whole, whole]
    assert spec.total_gpus == 2 * whole
    assert parse_job_spec(spec.to_document()) == spec


def test_the_document_names_the_share_only_when_there_is_one():
    plain = parse_job_spec(role_doc(gpuNumber=1)).to_document()["taskRoles"]["worker"]
    assert "gpuMemoryMB" not in plain and "gpuComputePercent" not in plain
    shared = parse_job_spec(role_doc(gpuMemoryMB=512, gpuComputePercent=20)).to_document()
    role = shared["taskRoles"]["worker"]
    assert (role["gpuMemoryMB"], role["gpuComputePercent"], role["gpuNumber"]) == (512, 20, 0)


@pytest.mark.parametrize(
    ("gpu_memory", "share", "expected"),
    [
        (81920, GpuShare(milli=500), 40960),
        (81920, GpuShare(milli=333), 27279),  # rounded down to whole MB
        (10, GpuShare(milli=1), 1),  # never 0
        (81920, GpuShare(memory_mb=20000), 20000),
    ],
)
def test_a_fraction_becomes_mb_on_the_gpu_it_lands_on(gpu_memory, share, expected):
    assert share.memory_on(gpu_memory) == expected


def test_openpai_fractional_gpu_is_a_share():
    doc = {
        "protocolVersion": 2,
        "name": "j",
        "type": "job",
        "prerequisites": [{"name": "img", "type": "dockerimage", "uri": "busybox"}],
        "taskRoles": {
            "t": {
                "dockerImage": "img",
                "resourcePerInstance": {"cpu": 1, "memoryMB": 512, "gpu": 0.5},
                "commands": ["true"],
            }
        },
    }
    role = parse_job_spec(doc).task_roles["t"]
    assert role.gpu_fraction == 0.5 and role.whole_gpus == 0
    doc["taskRoles"]["t"]["resourcePerInstance"]["gpu"] = 1.5
    with pytest.raises(Exception) as info:
        parse_job_spec(doc)
    assert "taskRoles.t.resourcePerInstance.gpu" in str(info.value)
