"""The value types with a hand-written `__init__` (docs/sim.md, Fast replays) behave as the
dataclasses they are: every field is a parameter, they stay frozen, compare and hash.

Runs on the pure package and again on the compiled build (`make test-compiled`), where a
field missing from `__init__` shows as `dataclasses.replace` failing.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from builders import held, make_node, make_running
from gpuyard.model import JobPlacement, Resources
from gpuyard.scheduler.cycle import CycleResult, CycleStats
from gpuyard.scheduler.multitenant import Parked
from gpuyard.scheduler.preempt import Demotion
from gpuyard.scheduler.quota import QuotaVerdict
from gpuyard.scheduler.reasons import PendingCode, PendingReason
from gpuyard.scheduler.round import Blocked
from gpuyard.scheduler.state import Charged
from gpuyard.scheduler.view import Admission, ClusterView, ViewChanges

REASON = PendingReason(PendingCode.INSUFFICIENT, "no room", 2, 5, 60.0)
BLOCKED = Blocked(REASON, parkable=True, wake_on=frozenset({"A100"}), wake_at=7200.0)
RUNNING = make_running("r1", "team-a", "n1", 0, 1, borrowed=1)
ADMISSION = Admission("j1", "team-a", (("A100", 2),))

SAMPLES: list[Any] = [
    Resources(1500, 2048, 2),
    held("n1", 0, 1),
    JobPlacement("j1", (held("n1", 0),)),
    RUNNING,
    QuotaVerdict((("A100", 2),), None, ""),
    QuotaVerdict((), PendingCode.QUOTA_EXCEEDED, "over quota"),
    REASON,
    BLOCKED,
    Parked("j1", True, BLOCKED),
    CycleStats(3, 1, 1),
    CycleResult((), (), {"j2": REASON}, CycleStats(2, 0, 1), (ADMISSION,)),
    ADMISSION,
    Demotion((3600.0, 36000.0), 1, False),
    Charged("team-a", RUNNING.placements, RUNNING.placements, {"A100": 2}, (("n1", "A100", 2),)),
    ViewChanges(3, frozenset({"a"}), (), frozenset({"b"}), (RUNNING,)),
    ClusterView((make_node("n1", gpus=2),), running=(RUNNING,), now=5.0, number=3),
]


@pytest.mark.parametrize("value", SAMPLES, ids=lambda v: type(v).__name__)
def test_every_field_goes_through_init_and_back(value):
    fields = dataclasses.fields(value)
    copy = dataclasses.replace(value)  # calls __init__ with every field by name
    assert copy == value and hash_or_none(copy) == hash_or_none(value)
    assert [getattr(copy, f.name) for f in fields] == [getattr(value, f.name) for f in fields]


@pytest.mark.parametrize("value", SAMPLES, ids=lambda v: type(v).__name__)
def test_it_stays_frozen(value):
    name = dataclasses.fields(value)[0].name
    with pytest.raises(AttributeError):  # FrozenInstanceError, or compiled: not writable
        setattr(value, name, getattr(value, name))


def test_defaults_are_the_documented_ones():
    assert Resources() == Resources(0, 0, 0)
    assert QuotaVerdict() == QuotaVerdict((), None, "")
    assert Blocked(REASON) == Blocked(REASON, False, frozenset(), True, math.inf)
    view = ClusterView(())
    assert (view.tenants, view.usage, view.running, view.queued) == ({}, {}, (), ())
    assert view.changes is None and view.number == 0 and view.now == 0.0
    assert CycleResult().pending_reasons == {} and CycleResult().stats == CycleStats(0, 0, 0)


def hash_or_none(value: Any) -> int | None:
    """The hash of a value whose fields all hash (a view holds dicts: it does not)."""
    try:
        return hash(value)
    except TypeError:
        return None
