"""The gate before the scheduler (controller/dependencies.py): `after` and a job array's
`%N` decide what the scheduler sees; an array's state summarises its children's."""

from __future__ import annotations

import pytest

from gpuyard.controller.dependencies import ARRAY_LIMIT, DEPENDENCY, decide
from gpuyard.model import (
    JOB_TRANSITIONS,
    FailureClass,
    JobState,
    TaskReason,
    array_state,
    failure_class,
)
from gpuyard.store import ArrayRecord, JobRecord

Q, R, S, F, X = (
    JobState.QUEUED,
    JobState.RUNNING,
    JobState.SUCCEEDED,
    JobState.FAILED,
    JobState.STOPPED,
)


def job(job_id: str, after: dict | None = None, array: str | None = None, index: int = 0):
    spec = {"after": after} if after else {}
    return JobRecord(
        job_id,
        index,
        "j",
        "red",
        "alice",
        Q,
        0,
        1,
        0,
        0,
        spec,
        0.0,
        None,
        None,
        None,
        None,
        None,
        None,
        None,
        array_id=array,
        array_index=index if array else None,
    )


def array(limit: int | None, **counts: int) -> ArrayRecord:
    by_state = {JobState(k): n for k, n in counts.items()}
    return ArrayRecord("arr", "j", "red", "alice", "0-9", 10, limit, 0.0, None, by_state)


@pytest.mark.parametrize(
    ("kind", "dep", "outcome"),
    [
        ("ok", Q, None),
        ("ok", R, None),
        ("ok", S, True),
        ("ok", F, False),
        ("ok", X, False),
        ("any", R, None),
        ("any", S, True),
        ("any", F, True),
        ("any", X, True),
        ("notok", R, None),
        ("notok", S, False),
        ("notok", F, True),
        ("notok", X, True),
    ],
)
def test_each_kind_of_dependency(kind, dep, outcome):
    gate = decide([job("d", {kind: ["a"]})], {"a": dep}, {})
    got = True if gate.ready else (None if gate.waiting else False)
    assert got is outcome
    if outcome is None:
        assert gate.waiting["d"].code == DEPENDENCY
    if outcome is False:
        assert "job a ended" in gate.never[0][1]


def test_a_job_that_is_gone_never_satisfies():
    gate = decide([job("d", {"any": ["gone"]})], {}, {})
    assert gate.never and "does not exist" in gate.never[0][1]


def test_all_dependencies_must_be_met():
    gate = decide([job("d", {"ok": ["a"], "any": ["b"]})], {"a": S, "b": R}, {})
    assert not gate.ready and "job b to end" in gate.waiting["d"].message


def test_an_array_lets_only_its_free_slots_through_in_index_order():
    children = [job(f"c{i}", array="arr", index=i) for i in range(6)]
    gate = decide(children, {}, {"arr": array(4, RUNNING=1, SCHEDULED=1, SUCCEEDED=3)})
    assert [j.id for j in gate.ready] == ["c0", "c1"]
    assert {j: p.code for j, p in gate.waiting.items()} == {
        f"c{i}": ARRAY_LIMIT for i in (2, 3, 4, 5)
    }
    assert "at most 4 at once (2 running now)" in gate.waiting["c2"].message


def test_an_array_without_a_limit_and_a_full_one():
    children = [job(f"c{i}", array="arr", index=i) for i in range(3)]
    assert len(decide(children, {}, {"arr": array(None, RUNNING=5)}).ready) == 3
    assert not decide(children, {}, {"arr": array(2, RUNNING=2)}).ready


def test_a_child_waiting_on_a_dependency_takes_no_slot():
    children = [job("c0", {"ok": ["a"]}, array="arr", index=0), job("c1", array="arr", index=1)]
    gate = decide(children, {"a": R}, {"arr": array(1)})
    assert [j.id for j in gate.ready] == ["c1"]


@pytest.mark.parametrize(
    ("counts", "state"),
    [
        ({Q: 3}, Q),
        ({Q: 2, S: 1}, R),
        ({Q: 2, JobState.SCHEDULED: 1}, R),
        ({S: 3}, S),
        ({S: 2, F: 1}, F),
        ({S: 2, X: 1}, X),
        ({F: 1, X: 1}, F),
    ],
)
def test_an_arrays_state_summarises_its_children(counts, state):
    assert array_state(counts) == state


def test_never_satisfied_is_a_queued_jobs_end_that_is_never_retried():
    assert JobState.FAILED in JOB_TRANSITIONS[JobState.QUEUED]
    assert failure_class(TaskReason.DEPENDENCY_NEVER_SATISFIED) is FailureClass.INVALID

