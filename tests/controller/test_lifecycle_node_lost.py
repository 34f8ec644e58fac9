"""A platform failure in an attempt (a node lost) decides the attempt, whatever its peers did.

When a node dies, the tasks of the same job on other nodes often fail first (a DDP peer sees
its connection closed): those errors follow from the loss and must not count as the user's.
"""

from __future__ import annotations

import pytest

from gpuyard.controller.lifecycle import Verdict, decide
from gpuyard.model import JobState, TaskReason, TaskState
from gpuyard.store import JobRecord, TaskRecord


def job(retry_count: int = 0) -> JobRecord:
    return JobRecord(
        "j1", 1, "ddp", "default", "alice", JobState.RUNNING, 0, 1, retry_count, 0, {},
        0.0, 1.0, None, None, None, None, None, None,
    )


def task(index: int, state: TaskState, reason: str | None, finished_at: float) -> TaskRecord:
    return TaskRecord(
        index, "j1", 1, "worker", index, f"k{index}", state, f"n{index}", (), 1000, 512,
        None, reason, None, 1.0, finished_at, False,
    )


ERROR = TaskReason.error(1)


@pytest.mark.parametrize(
    ("ends", "verdict", "reason"),
    [
        # the peer's error came first, the node's loss was seen later: still the platform's
        ([(TaskState.FAILED, ERROR, 5.0), (TaskState.FAILED, TaskReason.NODE_LOST, 9.0)],
         Verdict.RETRY_UNCOUNTED, TaskReason.NODE_LOST),
        ([(TaskState.FAILED, TaskReason.NODE_LOST, 5.0), (TaskState.FAILED, ERROR, 9.0)],
         Verdict.RETRY_UNCOUNTED, TaskReason.NODE_LOST),
        ([(TaskState.SUCCEEDED, TaskReason.COMPLETED, 5.0),
          (TaskState.FAILED, TaskReason.NODE_LOST, 9.0)],
         Verdict.RETRY_UNCOUNTED, TaskReason.NODE_LOST),
        # without a platform failure the user's error decides, as before
        ([(TaskState.FAILED, ERROR, 5.0), (TaskState.SUCCEEDED, TaskReason.COMPLETED, 9.0)],
         Verdict.FAIL, ERROR),
    ],
)
def test_a_lost_node_decides_the_attempt(ends, verdict, reason):
    tasks = [task(i, state, why, at) for i, (state, why, at) in enumerate(ends)]
    outcome = decide(job(), tasks)
    assert (outcome.verdict, outcome.reason) == (verdict, reason)
