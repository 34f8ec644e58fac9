"""Shared test setup: make tests/ importable for the builders."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import pytest  # noqa: E402

from tasknetworks import nodes_under, random_subnets, remove_node_network  # noqa: E402


@pytest.fixture(autouse=True)
def task_subnets(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    """This test's task subnet and task network (env, read by ContainerRuntime and `gpuyard
    up`), and nothing its nodes made left after it (tasknetworks.py)."""
    subnet, network = random_subnets()
    monkeypatch.setenv("GPUYARD_TASK_SUBNET", subnet)
    monkeypatch.setenv("GPUYARD_TASK_NETWORK", network)
    # where a test's nodes keep their state (asked for now: it is then torn down after this)
    tmp = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield subnet, network
    for tag in nodes_under(tmp) if tmp is not None else ():
        remove_node_network(tag)
