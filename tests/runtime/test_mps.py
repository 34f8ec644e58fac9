"""MPS daemons of shared GPUs, driven through a fake `nvidia-cuda-mps-control`."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from fake_mps import write_fake_mps
from gpuyard.model import GpuDevice
from gpuyard.runtime.env import build_env, mps_env
from gpuyard.runtime.errors import RuntimeStartError
from gpuyard.runtime.mps import MpsDaemons, mps_mounts
from gpuyard.runtime.types import TaskLaunch

GPU0 = GpuDevice(0, "GPU-fake-n1-0", "A100-80GB", 81920, fake=True)
GPU1 = GpuDevice(1, "GPU-fake-n1-1", "A100-80GB", 81920, fake=True)
REAL = GpuDevice(0, "GPU-0b6a1c2d", "A100-80GB", 81920, fake=False, minor=0)


def launch(key: str, gpu: GpuDevice = GPU0, memory_mb: int = 20000, percent=None) -> TaskLaunch:
    return TaskLaunch(
        key=key, job_id="j", job_name="j", role="w", index=0, attempt=1, command="true",
        cpu=1, memory_mb=512, gpus=(gpu,), gpu_memory_mb=memory_mb,
        gpu_compute_percent=percent,
    )  # fmt: skip


def test_one_daemon_per_gpu_started_by_the_first_task_quit_after_the_last(tmp_path: Path):
    fake = write_fake_mps(tmp_path / "bin")
    mps = MpsDaemons(tmp_path / "mps", str(fake.binary))
    a = mps.acquire(launch("a"))
    b = mps.acquire(launch("b"))
    mps.acquire(launch("c", GPU1))
    assert a == b and (a.pipe / "control").exists()
    assert fake.commands() == ["-d GPU-fake-n1-0", "-d GPU-fake-n1-1"]
    assert f"pipe={a.pipe} log={a.log}" in fake.calls()[0]
    mps.release("a")
    assert fake.commands()[2:] == [] and mps.running() == ["GPU-fake-n1-0", "GPU-fake-n1-1"]
    mps.release("b")
    assert fake.commands()[2:] == ["quit GPU-fake-n1-0"]
    assert not (a.pipe / "control").exists() and mps.running() == ["GPU-fake-n1-1"]
    mps.release("b")  # again: nothing left to do
    mps.acquire(launch("d"))  # the GPU is shared again: a new daemon
    assert fake.commands()[3:] == ["-d GPU-fake-n1-0"]


def test_a_restarted_agent_keeps_holders_and_sweeps_removed_tasks(tmp_path: Path):
    fake = write_fake_mps(tmp_path / "bin")
    MpsDaemons(tmp_path / "mps", str(fake.binary)).acquire(launch("a"))
    MpsDaemons(tmp_path / "mps", str(fake.binary)).acquire(launch("b"))
    again = MpsDaemons(tmp_path / "mps", str(fake.binary))
    again.sweep(["b"])  # `a` was removed while the agent was down
    assert fake.commands() == ["-d GPU-fake-n1-0"]
    again.sweep([])
    assert fake.commands() == ["-d GPU-fake-n1-0", "quit GPU-fake-n1-0"]


@pytest.mark.parametrize(
    ("gpu", "installed", "fail", "error"),
    [
        (REAL, False, False, "is not installed on this node"),
        (REAL, True, True, r"did not start \(exit 1\): An instance of this daemon"),
        (GPU0, True, True, "did not start"),
        (GPU0, False, False, None),  # a fake GPU without MPS: env and mounts, no daemon
        (replace(GPU0, uuid="../x"), True, False, "cannot name an MPS directory"),
    ],
)
def test_daemon_failures_are_start_errors(tmp_path: Path, gpu, installed, fail, error):
    fake = write_fake_mps(tmp_path / "bin", fail=fail)
    binary = str(fake.binary) if installed else str(tmp_path / "bin" / "missing")
    mps = MpsDaemons(tmp_path / "mps", binary)
    if error is None:
        mps.acquire(launch("a", gpu))
        assert mps.running() == [gpu.uuid] and fake.calls() == []
        mps.release("a")
        assert mps.running() == []
        return
    with pytest.raises(RuntimeStartError, match=error):
        mps.acquire(launch("a", gpu))
    assert mps.running() == []


@pytest.mark.parametrize(
    ("memory_mb", "percent", "expected"),
    [
        (0, None, {}),
        (
            20000,
            None,
            {
                "CUDA_MPS_PIPE_DIRECTORY": "/run/nvidia-mps",
                "CUDA_MPS_LOG_DIRECTORY": "/run/nvidia-mps-log",
                "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=20000M",
                "GPUYARD_GPU_MEMORY_LIMIT_MB": "20000",
            },
        ),
        (512, 30, {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "30"}),
    ],
)
def test_mps_env(memory_mb, percent, expected):
    env = mps_env(launch("a", memory_mb=memory_mb, percent=percent))
    assert expected.items() <= env.items() and bool(env) == bool(expected)


def test_platform_mps_env_wins_over_the_users():
    user = (("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=80G"), ("CUDA_MPS_PIPE_DIRECTORY", "/tmp"))
    entries = build_env(replace(launch("a"), env=user))
    assert "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=20000M" in entries
    assert "CUDA_MPS_PIPE_DIRECTORY=/run/nvidia-mps" in entries


def test_mounts_pipe_rw_and_log_ro(tmp_path: Path):
    d = MpsDaemons(tmp_path).dirs(GPU0)
    pipe, logs = mps_mounts(d)
    assert (pipe["source"], pipe["destination"], "rw" in pipe["options"]) == (
        str(d.pipe), "/run/nvidia-mps", True)
    assert (logs["source"], logs["destination"], "ro" in logs["options"]) == (
        str(d.log), "/run/nvidia-mps-log", True)
