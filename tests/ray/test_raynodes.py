"""How the Ray engine reads the Ray node table and its `--engine` address (no cluster needed)."""

from __future__ import annotations

import pytest

from gpuyard.engine.ray import parse_engine
from gpuyard.engine.raynodes import NAME_LABEL, fake_gpu_list, live_nodes


def entry(ip: str, host: str = "gpu1", alive: bool = True, name: str | None = None, **res):
    return {
        "NodeID": f"id-{ip}",
        "Alive": alive,
        "NodeManagerAddress": ip,
        "NodeManagerHostname": host,
        "Resources": {"CPU": 8.0, "memory": 16 * 1024**3, **res},
        "Labels": {NAME_LABEL: name} if name else {},
    }


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ({}, None),
        ({"gpuyard_fake_gpus_A100-80GB": 4.0}, "4xA100-80GB"),
        ({"gpuyard_fake_gpus_V100": 2.0, "gpuyard_fake_gpus_A100-80GB": 4.0},
         "4xA100-80GB,2xV100"),
        ({"gpuyard_fake_gpus_T4": 0.5, "GPU": 8.0}, None),  # no whole GPU; real ones: NVML
    ],
)
def test_fake_gpus_are_declared_as_resources(resources, expected):
    assert fake_gpu_list(resources) == expected


def test_nodes_are_named_by_label_else_hostname_else_hostname_and_ip():
    nodes = live_nodes([
        entry("10.0.0.1", host="head"),
        entry("10.0.0.2", host="gpu1"),
        entry("10.0.0.3", host="gpu1"),
        entry("10.0.0.4", host="gpu1", name="big"),
        entry("10.0.0.5", host="gone", alive=False),
    ])
    assert [(n.name, n.address) for n in nodes] == [
        ("big", "10.0.0.4"),
        ("gpu1-10.0.0.2", "10.0.0.2"),
        ("gpu1-10.0.0.3", "10.0.0.3"),
        ("head", "10.0.0.1"),
    ]
    assert (nodes[0].cpu_milli, nodes[0].memory_mb, nodes[0].fake_gpus) == (8000, 16384, None)


@pytest.mark.parametrize(
    ("text", "address"),
    [("local", None), ("ray://10.0.0.1:6379", "10.0.0.1:6379"), (" ray://head:1 ", "head:1")],
)
def test_engine_address(text, address):
    assert parse_engine(text) == address


@pytest.mark.parametrize("text", ["ray", "ray://head", "ray://:6379", "ray://h:0", "k8s://x:1"])
def test_bad_engine_address_says_what_is_expected(text):
    with pytest.raises(ValueError, match="ray://HOST:PORT"):
        parse_engine(text)
