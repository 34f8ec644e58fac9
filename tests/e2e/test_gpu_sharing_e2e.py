"""GPU sharing end to end: the real server, real containers, fake GPUs, a fake MPS daemon.

Two shared-GPU tasks land on ONE GPU, see the MPS environment and the daemon's pipe dir from
inside their containers, and the daemon of that GPU is started once and quit after both end.
A whole-GPU job never lands on the shared GPU, and waits with a reason while the only GPUs
left are shared.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from fake_mps import write_fake_mps

pytestmark = [pytest.mark.e2e, pytest.mark.container]

SHARED = """name: {name}
dataDir: {data}
taskRoles:
  main:
    cpuNumber: 0.1
    memoryMB: 64
    gpuMemoryMB: 30000
    gpuComputePercent: 40
    command: |
      env | grep -E '^(CUDA_MPS_|GPUYARD_GPU_MEMORY|CUDA_VISIBLE|NVIDIA_VISIBLE)' | sort
      echo "pipe: $(ls /run/nvidia-mps | tr '\\n' ' ')"
      while [ ! -e /data/go ]; do sleep 0.1; done
"""
WHOLE = """name: {name}
dataDir: {data}
taskRoles:
  main:
    cpuNumber: 0.1
    memoryMB: 64
    gpuNumber: {gpus}
    command: while [ ! -e /data/go-whole ]; do sleep 0.1; done
"""


def gpu_of(job: dict) -> list[tuple[int, int]]:
    return [(g["index"], t["gpuMemoryMB"]) for t in job["tasks"] for g in t["gpus"]]


def wait_for(condition, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError("condition not met in time")


def test_two_shared_tasks_share_one_gpu_under_mps(make_server, tmp_path: Path, monkeypatch):
    fake = write_fake_mps(tmp_path / "fake-bin")
    monkeypatch.setenv("PATH", f"{fake.binary.parent}{os.pathsep}{os.environ['PATH']}")
    server = make_server()
    data = server.storage / "data-dir"
    data.mkdir()

    s1 = server.submit(SHARED.format(name="shared-1", data=data))
    s2 = server.submit(SHARED.format(name="shared-2", data=data))
    jobs = [server.wait(j, {"RUNNING"}) for j in (s1, s2)]
    [(gpu, mb)] = gpu_of(jobs[0])
    assert gpu_of(jobs[1]) == [(gpu, 30000)] and mb == 30000  # the same GPU, 30000 MB each
    uuid = jobs[0]["tasks"][0]["gpus"][0]["uuid"]

    # the whole-GPU jobs: 3 GPUs are free, none of them the shared one; then none is
    whole = server.wait(server.submit(WHOLE.format(name="whole-3", data=data, gpus=3)),
                        {"RUNNING"})
    assert gpu not in [i for i, _ in gpu_of(whole)]
    waiting = server.submit(WHOLE.format(name="whole-1", data=data, gpus=1))
    wait_for(lambda: server.job(waiting)["pendingReason"])
    pending = server.job(waiting)
    assert pending["state"] == "QUEUED", pending
    assert "1 in shared mode" in pending["pendingReason"], pending

    # inside the containers: the MPS env and the daemon's pipe dir (the fake's control file)
    wait_for(lambda: all("pipe:" in server.logs(j) for j in (s1, s2)))
    for job_id in (s1, s2):
        log = server.logs(job_id)
        assert "CUDA_MPS_PIPE_DIRECTORY=/run/nvidia-mps" in log, log
        assert "CUDA_MPS_LOG_DIRECTORY=/run/nvidia-mps-log" in log
        assert "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=30000M" in log
        assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=40" in log
        assert "GPUYARD_GPU_MEMORY_LIMIT_MB=30000" in log
        assert f"NVIDIA_VISIBLE_DEVICES={uuid}" in log and "CUDA_VISIBLE_DEVICES=0" in log
        assert "control" in log.split("pipe:")[1]
    assert fake.commands() == [f"-d {uuid}"]  # one daemon for the GPU, started once

    (data / "go").touch()  # both shared tasks end: the daemon quits, the GPU is whole again
    for job_id in (s1, s2):
        assert server.wait(job_id)["state"] == "SUCCEEDED"
    wait_for(lambda: len(fake.commands()) == 2)
    assert fake.commands() == [f"-d {uuid}", f"quit {uuid}"]
    started = server.wait(waiting, {"RUNNING"})
    assert gpu_of(started) == [(gpu, 0)]  # the formerly shared GPU, now whole
    (data / "go-whole").touch()
    assert server.wait(waiting)["state"] == server.wait(whole["id"])["state"] == "SUCCEEDED"
