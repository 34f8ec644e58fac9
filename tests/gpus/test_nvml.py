"""discover_nvml_gpus through the real pynvml against the fake NVML library."""

from __future__ import annotations

import ctypes.util
from types import SimpleNamespace

import pynvml
import pytest

from gpuyard.model import GpuDevice
from gpuyard.runtime import gpus as gpus_module

DISCOVER = (
    "import dataclasses, json\n"
    "from gpuyard.runtime.gpus import discover_nvml_gpus\n"
    "print(json.dumps([dataclasses.asdict(g) for g in discover_nvml_gpus()]))\n"
)
DISCOVER_TWICE = (
    "import dataclasses, json\n"
    "from gpuyard.runtime.gpus import discover_nvml_gpus\n"
    "first, second = discover_nvml_gpus(), discover_nvml_gpus()\n"
    "assert first == second, (first, second)\n"
    "print(json.dumps([dataclasses.asdict(g) for g in first]))\n"
)
DETECT = (
    "import dataclasses, json\n"
    "from gpuyard.runtime.gpus import detect_gpus\n"
    "print(json.dumps([dataclasses.asdict(g) for g in detect_gpus(None, 'n1')]))\n"
)
METRICS = (
    "import json, pynvml as p\n"
    "p.nvmlInit()\n"
    "out = []\n"
    "for i in range(p.nvmlDeviceGetCount()):\n"
    "    h = p.nvmlDeviceGetHandleByIndex(i)\n"
    "    u = p.nvmlDeviceGetUtilizationRates(h)\n"
    "    m = p.nvmlDeviceGetMemoryInfo(h)\n"
    "    m2 = p.nvmlDeviceGetMemoryInfo(h, p.nvmlMemory_v2)\n"
    "    out.append([u.gpu, u.memory, p.nvmlDeviceGetTemperature(h, p.NVML_TEMPERATURE_GPU),\n"
    "                p.nvmlDeviceGetPowerUsage(h), m.used, m.free, m2.total, m2.used])\n"
    "driver = p.nvmlSystemGetDriverVersion()\n"
    "p.nvmlShutdown()\n"
    "print(json.dumps({'driver': driver, 'gpus': out}))\n"
)

UUID_1 = "GPU-11111111-2222-3333-4444-555555555555"
UUID_2 = "GPU-22222222-3333-4444-5555-666666666666"
TWO_A100 = f"NVIDIA A100-SXM4-80GB|{UUID_1}|81920;NVIDIA A100-SXM4-80GB|{UUID_2}|81920"


def test_discovers_the_gpus_nvml_reports(with_fake_nvml):
    gpus, _ = with_fake_nvml(DISCOVER, FAKE_NVML_GPUS=TWO_A100)
    assert gpus == [
        {
            "index": 0,
            "uuid": UUID_1,
            "type": "A100-SXM4-80GB",
            "memory_mb": 81920,
            "fake": False,
            "healthy": True,
            "minor": 0,
            "topology_group": 0,
            "health_cause": None,
        },
        {
            "index": 1,
            "uuid": UUID_2,
            "type": "A100-SXM4-80GB",
            "memory_mb": 81920,
            "fake": False,
            "healthy": True,
            "minor": 1,
            "topology_group": 1,
            "health_cause": None,
        },
    ]


def test_names_minor_numbers_and_memory_come_from_nvml(with_fake_nvml):
    spec = (
        "Tesla V100-SXM2-16GB|GPU-aaaa|16160|4;"
        "NVIDIA H100 80GB HBM3|GPU-bbbb|81559|7;"
        "NVIDIA GeForce RTX 4090|GPU-cccc|24564|2"
    )
    gpus, _ = with_fake_nvml(DISCOVER, FAKE_NVML_GPUS=spec)
    assert [(g["type"], g["uuid"], g["memory_mb"], g["minor"]) for g in gpus] == [
        ("V100-SXM2-16GB", "GPU-aaaa", 16160, 4),
        ("H100-80GB-HBM3", "GPU-bbbb", 81559, 7),
        ("GeForce-RTX-4090", "GPU-cccc", 24564, 2),
    ]
    assert not any(g["fake"] for g in gpus)


def test_repeated_discovery_in_one_process(with_fake_nvml):
    gpus, _ = with_fake_nvml(DISCOVER_TWICE, FAKE_NVML_GPUS=TWO_A100)
    assert len(gpus) == 2


def test_no_gpus_when_nvml_reports_none(with_fake_nvml):
    gpus, _ = with_fake_nvml(DISCOVER)
    assert gpus == []


@pytest.mark.parametrize("failure", ["driver_not_loaded", "no_permission", "unknown"])
def test_no_gpus_when_nvml_init_fails(with_fake_nvml, failure):
    gpus, stderr = with_fake_nvml(DISCOVER, FAKE_NVML_GPUS=TWO_A100, FAKE_NVML_FAIL=failure)
    assert gpus == []
    assert "Traceback" not in stderr


def test_a_lost_gpu_is_left_out_with_a_warning(with_fake_nvml):
    gpus, stderr = with_fake_nvml(DISCOVER, FAKE_NVML_GPUS=TWO_A100, FAKE_NVML_FAIL="gpu_is_lost:0")
    assert [g["uuid"] for g in gpus] == [UUID_2]
    assert "NVML GPU 0 left out" in stderr


def test_detect_gpus_uses_nvml_without_declared_gpus(with_fake_nvml):
    gpus, _ = with_fake_nvml(DETECT, FAKE_NVML_GPUS=TWO_A100)
    assert [g["uuid"] for g in gpus] == [UUID_1, UUID_2]


def test_no_gpus_without_the_library(without_nvml):
    if ctypes.util.find_library("nvidia-ml"):
        pytest.skip("this machine has a real libnvidia-ml")
    gpus, stderr = without_nvml(DISCOVER)
    assert gpus == []
    assert "Traceback" not in stderr


def test_fake_library_answers_metrics_queries(with_fake_nvml):
    spec = f"NVIDIA A100-SXM4-80GB|{UUID_1}|81920|0|87|42|65|312000|1024;NVIDIA T4|{UUID_2}|15360"
    result, _ = with_fake_nvml(METRICS, FAKE_NVML_GPUS=spec)
    mib = 1024 * 1024
    assert result["driver"] == "550.54.15"
    assert result["gpus"] == [
        [87, 42, 65, 312000, 1024 * mib, (81920 - 1024) * mib, 81920 * mib, 1024 * mib],
        [0, 0, 40, 50000, 0, 15360 * mib, 15360 * mib, 0],
    ]


def test_bytes_from_older_pynvml_and_unsupported_minor_numbers(monkeypatch):
    """Older pynvml returns bytes; some platforms answer NOT_SUPPORTED for minor numbers."""

    def not_supported(handle):
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)

    calls = []
    fakes = {
        "nvmlInit": lambda: calls.append("init"),
        "nvmlShutdown": lambda: calls.append("shutdown"),
        "nvmlDeviceGetCount": lambda: 1,
        "nvmlDeviceGetHandleByIndex": lambda index: f"handle{index}",
        "nvmlDeviceGetName": lambda handle: b"NVIDIA L4",
        "nvmlDeviceGetUUID": lambda handle: b"GPU-abcd",
        "nvmlDeviceGetMemoryInfo": lambda handle: SimpleNamespace(total=23034 * 1024 * 1024),
        "nvmlDeviceGetMinorNumber": not_supported,
    }
    for name, fake in fakes.items():
        monkeypatch.setattr(pynvml, name, fake)
    assert gpus_module.discover_nvml_gpus() == (
        GpuDevice(
            index=0,
            uuid="GPU-abcd",
            type="L4",
            memory_mb=23034,
            fake=False,
            minor=None,
            topology_group=0,
        ),
    )
    assert calls == ["init", "shutdown"]


def test_shutdown_even_when_counting_fails(monkeypatch):
    def count_fails():
        raise pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)

    calls = []
    monkeypatch.setattr(pynvml, "nvmlInit", lambda: calls.append("init"))
    monkeypatch.setattr(pynvml, "nvmlShutdown", lambda: calls.append("shutdown"))
    monkeypatch.setattr(pynvml, "nvmlDeviceGetCount", count_fails)
    assert gpus_module.discover_nvml_gpus() == ()
    assert calls == ["init", "shutdown"]
