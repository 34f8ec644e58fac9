"""Task logs through the API: whole, tail, and a log whose node has left the cluster."""

from __future__ import annotations

import pytest

LOG = b"epoch 1\nepoch 2\n"  # as tests/api/conftest.py gives every task


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("", LOG.decode()),
        ("?tail=1", "epoch 2\n"),
        ("?tail=0", ""),
    ],
)
def test_a_log_is_read_whole_or_its_tail(shared_world, query, expected):
    red = shared_world.jobs["red"]
    r = shared_world.call("alice", "GET", f"/api/v1/jobs/{red}/logs{query}")
    assert r.status_code == 200
    assert r.text == expected


@pytest.mark.parametrize("query", ["", "?tail=5", "?follow=true", "?tail=5&follow=true"])
def test_a_log_on_a_lost_node_says_so_instead_of_breaking(world, query):
    red = world.jobs["red"]
    world.engine.lose_node("n1")  # the controller has not noticed yet: the task still runs
    r = world.call("alice", "GET", f"/api/v1/jobs/{red}/logs{query}")
    assert r.status_code == 200
    assert "[gpuyard] the log of main/0 is on node n1, which has left the cluster" in r.text


def test_a_followed_tail_continues_from_the_end_without_repeating(world):
    red = world.jobs["red"]
    (key,) = world.engine.keys_on(red)
    world.engine.run(key)
    world.engine.exit(key, 0, "Completed")
    world.ctl.run_cycle()  # the task is recorded as ended: the follow stops at the log's end
    r = world.call("alice", "GET", f"/api/v1/jobs/{red}/logs?tail=1&follow=true")
    assert r.status_code == 200
    assert r.text == "epoch 2\n"
