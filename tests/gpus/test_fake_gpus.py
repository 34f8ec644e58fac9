"""Declared fake GPUs: the inventory syntax, memory sizes, UUIDs, and detect_gpus' choice."""

from __future__ import annotations

import pytest

from gpuyard.model import GpuDevice
from gpuyard.runtime import gpus as gpus_module
from gpuyard.runtime.gpus import (
    detect_gpus,
    fake_uuid,
    memory_mb_for_type,
    normalize_gpu_name,
    parse_fake_gpus,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4xA100-80GB", [("A100-80GB", 81920)] * 4),
        ("2xA100-80GB,2xV100", [("A100-80GB", 81920)] * 2 + [("V100", 16384)] * 2),
        ("A100:4", [("A100", 40960)] * 4),
        ("1xH100", [("H100", 81920)]),
        ("1xT4", [("T4", 16384)]),
        ("1xL4", [("L4", 24576)]),
        ("1xA10", [("A10", 24576)]),
        ("1xA100-SXM4", [("A100-SXM4", 40960)]),
        ("1xH100-80GB-HBM3", [("H100-80GB-HBM3", 81920)]),
        ("1xRTX4090", [("RTX4090", 24576)]),
        ("1xMI300X", [("MI300X", 16384)]),
        ("2 x a100-40gb", [("A100-40GB", 40960)] * 2),
        ("3XV100", [("V100", 16384)] * 3),
        (" 1xT4 , L4:1 ", [("T4", 16384), ("L4", 24576)]),
    ],
)
def test_parses_declared_inventories(text, expected):
    gpus = parse_fake_gpus(text, node="n1")
    assert [(g.type, g.memory_mb) for g in gpus] == expected
    assert [g.index for g in gpus] == list(range(len(expected)))
    assert all(g.fake and g.minor is None and g.healthy for g in gpus)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "expected COUNTxTYPE like 4xA100-80GB, got ''"),
        ("A100", "expected COUNTxTYPE like 4xA100-80GB"),
        ("4x", "expected COUNTxTYPE like 4xA100-80GB"),
        ("xA100", "expected COUNTxTYPE like 4xA100-80GB"),
        ("4*A100", "expected COUNTxTYPE like 4xA100-80GB"),
        ("-1xA100", "expected COUNTxTYPE like 4xA100-80GB"),
        ("4xA100 80GB", "expected COUNTxTYPE like 4xA100-80GB"),
        ("A100:four", "expected COUNTxTYPE like 4xA100-80GB"),
        ("4xA100,", "got ''"),
        ("2xA100,,2xV100", "got ''"),
        ("0xA100", "count must be at least 1"),
        ("A100:0", "count must be at least 1"),
        ("2000xA100", "too many fake GPUs"),
        ("8xA100@0", "island size after @ must be at least 1, got '8xA100@0'"),
        ("A100:4@0", "island size after @ must be at least 1"),
        ("6xA100@4", "count 6 is not a multiple of island size 4 in '6xA100@4'"),
        ("2xA100@4", "count 2 is not a multiple of island size 4"),
        ("8xA100@", "expected COUNTxTYPE like 4xA100-80GB"),
        ("8xA100@-2", "expected COUNTxTYPE like 4xA100-80GB"),
        ("8xA100@4@2", "expected COUNTxTYPE like 4xA100-80GB"),
        ("@4", "expected COUNTxTYPE like 4xA100-80GB"),
    ],
)
def test_rejects_bad_inventories(text, message):
    with pytest.raises(ValueError) as info:
        parse_fake_gpus(text)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("text", "groups"),
    [
        ("8xA100-80GB@4", [0, 0, 0, 0, 1, 1, 1, 1]),
        ("8xA100-80GB@2", [0, 0, 1, 1, 2, 2, 3, 3]),
        ("8xA100-80GB@8", [0] * 8),
        ("4xA100@1", [0, 1, 2, 3]),
        ("4xA100-80GB,4xA100-80GB", [0, 0, 0, 0, 1, 1, 1, 1]),
        ("A100:4", [0, 0, 0, 0]),
        ("A100:4@2", [0, 0, 1, 1]),
        ("4xH100@2,2xT4", [0, 0, 1, 1, 2, 2]),
        ("1xT4,4xA100 @ 2,T4:1", [0, 1, 1, 2, 2, 3]),
        ("1xL4", [0]),
    ],
)
def test_declared_topology_islands(text, groups):
    gpus = parse_fake_gpus(text)
    assert [g.topology_group for g in gpus] == groups
    assert [g.index for g in gpus] == list(range(len(groups)))


def test_fake_uuids_are_deterministic_unique_and_visibly_fake():
    first, second = (
        parse_fake_gpus("2xA100", node="gpu-01"),
        parse_fake_gpus("2xA100", node="gpu-01"),
    )
    assert [g.uuid for g in first] == ["GPU-fake-gpu-01-0000", "GPU-fake-gpu-01-0001"]
    assert first == second
    assert {g.uuid for g in parse_fake_gpus("1xA100", node="gpu-02")}.isdisjoint(
        g.uuid for g in first
    )
    assert fake_uuid("my host/1", 3) == "GPU-fake-my-host-1-0003"
    assert fake_uuid("", 0) == "GPU-fake-node-0000"


def test_fake_gpus_are_labelled_fake():
    (gpu,) = parse_fake_gpus("1xA100-80GB")
    assert gpu == GpuDevice(
        0, "GPU-fake-local-0000", "A100-80GB", 81920, fake=True, minor=None, topology_group=0
    )
    assert gpu.label == "A100-80GB (fake)"


@pytest.mark.parametrize(
    ("gpu_type", "memory_mb"),
    [
        ("A100-80GB", 81920),
        ("a100", 40960),
        ("A10G", 24576),
        ("V100S-PCIE", 32768),
        ("UNKNOWN", 16384),
        ("X-12GB", 12288),
    ],
)
def test_memory_for_type(gpu_type, memory_mb):
    assert memory_mb_for_type(gpu_type) == memory_mb


@pytest.mark.parametrize(
    ("name", "gpu_type"),
    [
        ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"),
        (b"NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"),
        ("NVIDIA H100 80GB HBM3", "H100-80GB-HBM3"),
        ("Tesla T4", "T4"),
        ("  NVIDIA  L40S ", "L40S"),
    ],
)
def test_normalizes_nvml_names(name, gpu_type):
    assert normalize_gpu_name(name) == gpu_type


def test_detect_gpus_prefers_declared_gpus(monkeypatch):
    monkeypatch.setattr(gpus_module, "discover_nvml_gpus", lambda: pytest.fail("asked NVML"))
    gpus = detect_gpus("2xT4", node="n7")
    assert [g.uuid for g in gpus] == ["GPU-fake-n7-0000", "GPU-fake-n7-0001"]
    assert all(g.fake for g in gpus)


@pytest.mark.parametrize("fake", [None, "", "  "])
def test_detect_gpus_asks_nvml_without_declared_gpus(monkeypatch, fake):
    nvml_gpus = (GpuDevice(0, "GPU-real", "A100-SXM4-80GB", 81920, minor=0),)
    monkeypatch.setattr(gpus_module, "discover_nvml_gpus", lambda: nvml_gpus)
    assert detect_gpus(fake, node="n7") == nvml_gpus
