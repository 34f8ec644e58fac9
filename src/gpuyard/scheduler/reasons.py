"""Why a job waits: a machine-readable code and a sentence a person can act on.

A reason may also say where the job stands in its tenant's queue (`position` of
`queue_length`, 1-based) and when it is expected to start (`estimated_start`, the same clock
as the cycle's `now`; None when no estimate can be made), with what the estimate rests on
(`eta_basis`: "the run times of 3 running jobs: 2 by maxRuntime, 1 learned from history";
None when the code says it: a preemption's grace period, a budget period's end).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class PendingCode(enum.StrEnum):
    NO_NODES = "NoNodes"  # no schedulable node at all
    NO_GPU_TYPE = "NoMatchingGpuType"  # no node has GPUs of the asked type
    EXCEEDS_NODE = "ExceedsNodeCapacity"  # a task is bigger than any node, even empty
    INSUFFICIENT = "InsufficientResources"  # would fit an idle cluster; waits for running jobs
    BEHIND = "WaitingForEarlierJob"  # fits now, but a job ahead in the queue waits first
    FRAGMENTED = "Fragmented"  # enough free in total, but not on the nodes the gang needs
    QUOTA_EXCEEDED = "QuotaExceeded"  # free capacity is guaranteed to tenants that don't lend
    BORROWING_LIMIT = "BorrowingLimit"  # the tenant's borrowing limit is reached
    USER_GPU_LIMIT = "UserGpuLimit"  # the owner's max GPUs in the tenant is reached
    USER_JOB_LIMIT = "UserJobLimit"  # the owner's max running jobs in the tenant is reached
    BUDGET_EXHAUSTED = "BudgetExhausted"  # the tenant used its GPU-hour budget of the period
    WAITING_FOR_PREEMPTION = "WaitingForPreemption"  # borrowers are being preempted for it


NEVER_RUNS = frozenset({PendingCode.NO_NODES, PendingCode.NO_GPU_TYPE, PendingCode.EXCEEDS_NODE})


@dataclass(frozen=True, slots=True, init=False)
class PendingReason:
    code: PendingCode
    message: str
    position: int | None
    queue_length: int | None
    estimated_start: float | None
    eta_basis: str | None

    def __init__(
        self,
        code: PendingCode,
        message: str,
        position: int | None = None,
        queue_length: int | None = None,
        estimated_start: float | None = None,
        eta_basis: str | None = None,
    ) -> None:  # by hand: compiled, it is built natively (docs/sim.md, Fast replays)
        object.__setattr__(self, "code", code)
        object.__setattr__(self, "message", message)
        object.__setattr__(self, "position", position)
        object.__setattr__(self, "queue_length", queue_length)
        object.__setattr__(self, "estimated_start", estimated_start)
        object.__setattr__(self, "eta_basis", eta_basis)

    @property
    def can_ever_run(self) -> bool:
        return self.code not in NEVER_RUNS


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, 11th, 21st."""
    if 10 <= n % 100 <= 20:
        return f"{n}th"
    return f"{n}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th') }"
