"""Shared test setup: make tests/ importable for the builders."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import pytest  # noqa: E402

from tasknetworks import node_tags_in, random_subnets, remove_node_network  # noqa: E402


@pytest.fixture(autouse=True)
def task_subnets(monkeypatch: pytest.MonkeyPatch):
    """This test's task subnet and task network (env, read by ContainerRuntime and `gpuyard
    up`), and nothing gpuyard made on them left after it (tasknetworks.py)."""
    subnet, network = random_subnets()
    monkeypatch.setenv("GPUYARD_TASK_SUBNET", subnet)
    monkeypatch.setenv("GPUYARD_TASK_NETWORK", network)
    yield subnet, network
    for tag in node_tags_in(subnet, network):
        remove_node_network(tag)
