"""The task network's pieces on their own: subnets, the nftables text, a node's subnet book.

The containers' side (what a task reaches, what is left behind) is tests/security/
test_network.py.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from pathlib import Path

import pytest

from gpuyard.engine.subnets import SubnetBook, SubnetsExhausted
from gpuyard.runtime import nftrules
from gpuyard.runtime.tasknet import NetConfig


def test_a_node_subnet_must_lie_in_the_cluster_network_and_hold_tasks() -> None:
    assert NetConfig.of("10.9.3.0/24", "10.9.0.0/16") == NetConfig("10.9.3.0/24", "10.9.0.0/16")
    assert NetConfig.of("10.9.3.0/24").pool == "10.9.3.0/24"  # one node: the subnet alone
    for subnet, pool in (("10.8.3.0/24", "10.9.0.0/16"), ("10.9.3.0/30", None),
                         ("10.9.3.1/24", None), ("fd00::/64", None)):
        with pytest.raises(ValueError):
            NetConfig.of(subnet, pool)


def test_only_addresses_get_into_a_ruleset() -> None:
    for bad in ("10.0.0.1; flush ruleset", "10.0.0.1 }", "::1", "host"):
        with pytest.raises(ValueError):
            nftrules.task_up("gpuyard_x", bad, [], internet=True)
        with pytest.raises(ValueError):
            nftrules.task_up("gpuyard_x", "10.0.0.2", [bad], internet=False)
    with pytest.raises(ValueError):
        nftrules.node_rules("gpuyard_x", 'gpy-x" accept', "10.0.0.0/24", "10.0.0.0/24")


def test_a_task_pairs_with_each_peer_both_ways_and_never_with_itself() -> None:
    text = nftrules.task_up("t", "10.0.0.2", ["10.0.0.2", "10.0.1.7"], internet=False)
    assert text == (
        "add element inet t pairs { 10.0.0.2 . 10.0.1.7, 10.0.1.7 . 10.0.0.2 }\n"
        "add element bridge t pairs { 10.0.0.2 . 10.0.1.7, 10.0.1.7 . 10.0.0.2 }\n"
    )
    assert nftrules.task_up("t", "10.0.0.2", ["10.0.0.2"], internet=False) == ""
    assert "internet { 10.0.0.2 }" in nftrules.task_up("t", "10.0.0.2", [], internet=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="nft needs root")
def test_the_node_rules_apply_twice_and_a_tasks_teardown_runs_twice() -> None:
    # not `gpuyard_…`: a node starting on another worker drops those whose bridge is gone
    table = f"gytest{secrets.token_hex(3)}"
    rules = nftrules.node_rules(table, "gpy-test0", "10.9.3.0/24", "10.9.0.0/16")
    try:
        nftrules.run(rules)
        up = nftrules.task_up(table, "10.9.3.2", ["10.9.4.2"], internet=True)
        nftrules.run(up)
        nftrules.run(rules)  # a restarted node: chains filled again, its tasks' elements kept
        listed = subprocess.run(["nft", "list", "set", "inet", table, "pairs"],
                                capture_output=True, text=True, check=True).stdout
        assert "10.9.3.2 . 10.9.4.2" in listed
        down = nftrules.task_down(table, "10.9.3.2", ["10.9.4.2"], internet=True)
        nftrules.run(down)
        nftrules.run(down)  # the supervisor and `remove` may both tear a task down
        listed = subprocess.run(["nft", "list", "table", "inet", table],
                                capture_output=True, text=True, check=True).stdout
        assert "10.9.3.2" not in listed
    finally:
        nftrules.run(nftrules.drop_tables(table))
    assert not nftrules.tables_present(table)
    nftrules.run(nftrules.drop_tables(table))  # nothing there: still fine


def test_each_node_keeps_its_subnet_and_none_is_given_twice(tmp_path: Path) -> None:
    book = SubnetBook(tmp_path / "subnets.json", "10.9.0.0/23")
    assert (book.of("a"), book.of("b"), book.of("a")) == ("10.9.0.0/24", "10.9.1.0/24",
                                                          "10.9.0.0/24")
    with pytest.raises(SubnetsExhausted):
        book.of("c")
    again = SubnetBook(tmp_path / "subnets.json", "10.9.0.0/23")  # a control plane restarts
    assert again.of("b") == "10.9.1.0/24"
    again.saw("b", "10.9.7.0/24")  # an adopted agent says what it runs with
    assert SubnetBook(tmp_path / "subnets.json", "10.9.0.0/23").of("b") == "10.9.7.0/24"
