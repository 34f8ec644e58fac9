"""Why a job waits: a machine-readable code and a sentence a person can act on."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class PendingCode(enum.StrEnum):
    NO_NODES = "NoNodes"  # no schedulable node at all
    NO_GPU_TYPE = "NoMatchingGpuType"  # no node has GPUs of the asked type
    EXCEEDS_NODE = "ExceedsNodeCapacity"  # a task is bigger than any node, even empty
    INSUFFICIENT = "InsufficientResources"  # would fit an idle cluster; waits for running jobs
    BEHIND = "WaitingForEarlierJob"  # fits now, but a job ahead in the queue waits first


@dataclass(frozen=True, slots=True)
class PendingReason:
    code: PendingCode
    message: str

    @property
    def can_ever_run(self) -> bool:
        return self.code not in (
            PendingCode.NO_NODES,
            PendingCode.NO_GPU_TYPE,
            PendingCode.EXCEEDS_NODE,
        )
