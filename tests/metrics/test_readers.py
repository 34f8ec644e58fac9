"""The readers behind the metrics: a cgroup's CPU time and memory, and the DCGM families from
the real pynvml over the fake NVML (a subprocess with LD_LIBRARY_PATH, as in tests/gpus)."""

from __future__ import annotations

from gpuyard.runtime.cgroups import task_usage

DCGM_CODE = """
import json
from gpuyard.metrics import ClusterCollector, ClusterSample, GpuReading, Instruments
from gpuyard.metrics import build_registry, render
from gpuyard.runtime.gpustats import NvmlSampler
from gpuyard.model import GpuDevice
from prometheus_client.parser import text_string_to_metric_families

sampler = NvmlSampler()
readings = [GpuReading(s, "node-a", "job1" if s.index == 0 else "", "red" if s.index == 0 else "")
            for s in sampler.samples()]
registry = build_registry(ClusterCollector(lambda: ClusterSample(readings=readings)), Instruments())
out = [[s.name, s.labels, s.value] for f in text_string_to_metric_families(render(registry).decode())
       for s in f.samples if s.name.startswith("DCGM_")]
real = GpuDevice(0, "GPU-aaaa", "A100-SXM4-80GB", 81920)
fake = GpuDevice(1, "GPU-bbbb", "A100-SXM4-80GB", 81920, fake=True)
print(json.dumps({"samples": out, "util": sampler.utilization(real),
                  "fake": sampler.utilization(fake)}))
"""
GPUS = (
    "NVIDIA A100-SXM4-80GB|GPU-aaaa|81920|0|37|5|61|250500|1024;"
    "NVIDIA A100-SXM4-80GB|GPU-bbbb|81920|1|0|0|40|50000|0"
)


def test_dcgm_names_and_labels_from_nvml(with_fake_nvml):
    out, _ = with_fake_nvml(DCGM_CODE, FAKE_NVML_GPUS=GPUS)
    by = {(name, labels["gpu"]): (labels, v) for name, labels, v in out["samples"]}
    labels, util = by[("DCGM_FI_DEV_GPU_UTIL", "0")]
    assert util == 37
    assert labels == {
        "gpu": "0",
        "UUID": "GPU-aaaa",
        "device": "nvidia0",
        "modelName": "NVIDIA A100-SXM4-80GB",
        "Hostname": "node-a",
        "node": "node-a",
        "job": "job1",
        "tenant": "red",
    }
    assert by[("DCGM_FI_DEV_FB_USED", "0")][1] == 1024
    assert by[("DCGM_FI_DEV_FB_FREE", "0")][1] == 81920 - 1024
    assert by[("DCGM_FI_DEV_GPU_TEMP", "0")][1] == 61
    assert by[("DCGM_FI_DEV_POWER_USAGE", "0")][1] == 250.5
    assert by[("DCGM_FI_DEV_GPU_UTIL", "1")][0]["job"] == ""
    assert out["util"] == 37 and out["fake"] is None


def test_no_nvml_no_samples(without_nvml):
    code = (
        "import json; from gpuyard.runtime.gpustats import NvmlSampler; s = NvmlSampler();"
        "print(json.dumps([s.available, len(s.samples())]))"
    )
    out, _ = without_nvml(code)
    assert out == [False, 0]


def test_cgroup_usage_of_the_root_cgroup():
    usage = task_usage("/")
    assert usage is not None and usage.cpu_seconds > 0


def test_no_cgroup_no_usage():
    assert task_usage("/gpuyard/no-such-task-a1-main-0") is None
