"""Bodies of the after-submit controls of jobs: bulk cancel, resubmit, hold, priority."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from gpuyard.api.schemas.common import NotBool, Out, camel
from gpuyard.spec.limits import PRIORITY

#: a job state as a filter takes it, either case (an unknown one is a 422)
StateName = Literal[
    "QUEUED", "SCHEDULED", "RUNNING", "SUCCEEDED", "FAILED", "STOPPED",
    "queued", "scheduled", "running", "succeeded", "failed", "stopped",
]  # fmt: skip
MAX_BULK = 1000  # jobs one bulk cancel acts on; `more` says when others matched too
MAX_SETS = 50


class In(BaseModel):
    """A request body: camelCase, unknown fields refused."""

    model_config = ConfigDict(alias_generator=camel, populate_by_name=True, extra="forbid")


class BulkCancelIn(In):
    """Which jobs to cancel, by the filters of `GET /api/v1/jobs`; at least one is needed.
    `dryRun`: say what would be cancelled and refused, cancel nothing."""

    user: StrictStr | None = None
    tenant: StrictStr | None = None
    state: list[StateName] | None = None
    name: StrictStr | None = None
    since: StrictStr | None = None
    ids: Annotated[list[StrictStr] | None, Field(max_length=MAX_BULK)] = None
    dry_run: StrictBool = False


class Refusal(Out):
    id: str
    name: str
    tenant: str
    owner: str | None
    reason: str


class BulkCancelled(Out):
    """`matched`: jobs the filters found (of those the caller sees, not yet asked to stop);
    `cancelled`: their ids; `refused`: the others and why; `more`: over `MAX_BULK` matched,
    run it again for the rest."""

    matched: int
    cancelled: list[str]
    refused: list[Refusal]
    dry_run: bool
    more: bool


class ResubmitIn(In):
    """`set`: dotted path in the original document → its new value (`{"taskRoles.worker.
    gpuNumber": 2}`); a list item by its index (`taskRoles.main.commands.0`)."""

    set: Annotated[dict[StrictStr, Any], Field(max_length=MAX_SETS)] = {}


class PriorityIn(In):
    priority: Annotated[StrictInt, NotBool, Field(ge=PRIORITY[0], le=PRIORITY[1])]
