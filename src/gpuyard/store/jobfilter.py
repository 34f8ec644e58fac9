"""Which jobs a list or a bulk action is about: `JobFilter` and the query it makes.

Shared by `GET /api/v1/jobs` (with a cursor: jobs older than the last one shown) and the bulk
cancel (`POST /api/v1/jobs/bulk/cancel`). A name is matched by a glob (`*` any run of characters,
`?` one character, case-insensitive), turned into SQL `LIKE` so SQLite and PostgreSQL agree.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from sqlalchemy import Select, func

from gpuyard.store.tables import JobRow

LIKE_ESCAPE = "\\"


@dataclass(frozen=True, slots=True)
class JobFilter:
    """None (or empty `states`) means no filter on that field."""

    states: tuple[str, ...] = ()
    tenants: Collection[str] | None = None
    owners: Collection[str] | None = None
    name_glob: str | None = None
    since: float | None = None  # submitted at or after (epoch seconds)
    before_seq: int | None = None  # the cursor: jobs submitted before this one
    ids: Collection[str] | None = None
    cancel_not_asked: bool = False  # leave out jobs already asked to be cancelled


def glob_to_like(glob: str) -> str:
    """`train-*` → `train-%`; `%`, `_` and the escape itself are matched literally."""
    out = []
    for ch in glob:
        if ch in (LIKE_ESCAPE, "%", "_"):
            out.append(LIKE_ESCAPE + ch)
        elif ch == "*":
            out.append("%")
        elif ch == "?":
            out.append("_")
        else:
            out.append(ch)
    return "".join(out)


def filtered(q: Select[tuple[JobRow]], f: JobFilter) -> Select[tuple[JobRow]]:
    """`q` with a WHERE clause for each field of `f` that is set."""
    if f.states:
        q = q.where(JobRow.state.in_(list(f.states)))
    if f.tenants is not None:
        q = q.where(JobRow.tenant.in_(list(f.tenants)))
    if f.owners is not None:
        q = q.where(JobRow.owner.in_(list(f.owners)))
    if f.name_glob is not None:
        like = glob_to_like(f.name_glob.lower())
        q = q.where(func.lower(JobRow.name).like(like, escape=LIKE_ESCAPE))
    if f.since is not None:
        q = q.where(JobRow.submitted_at >= f.since)
    if f.before_seq is not None:
        q = q.where(JobRow.seq < f.before_seq)
    if f.ids is not None:
        q = q.where(JobRow.id.in_(list(f.ids)))
    if f.cancel_not_asked:
        q = q.where(JobRow.stop_requested.is_(None) | (JobRow.stop_requested != "Cancelled"))
    return q
