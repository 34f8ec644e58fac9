"""Job revisions: what lets the controller read only the jobs that changed.

Every transaction that changes a job row in a way the controller acts on (a submission, a
move, a bind, a hold, a priority, a stop asked, ...) takes the next number of one counter
(`revisions`, row `jobs`) just before it commits, and writes it into the `rev` of each job
row it touched. The number is taken under the counter row's lock (PostgreSQL: the row lock
of the UPDATE, held to the commit; SQLite: its one writer), and as the last thing the
transaction does, so the numbers become visible in the order they were given and no lock is
taken after it (no deadlock with a job row's lock): a reader that has seen number n has
seen every row with a smaller one, and reads `rev > n` next (`JobRepo.changed_since`).

Not counted: the pending reasons (the controller's own output, written every cycle) and a
session's pings (`session_seen_at`), which would make every cycle look busy.

ORM writes are found by the session (`before_flush`: new rows, and changed ones whose
changes are not only those columns); Core statements name their rows (`touch`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import event, inspect, update
from sqlalchemy.orm import Session, sessionmaker

from gpuyard.store.tables import JobRow, RevisionRow

JOBS_COUNTER = "jobs"
NOT_COUNTED = frozenset(
    {
        "pending_code",
        "pending_reason",
        "pending_position",
        "pending_queue_length",
        "pending_eta",
        "pending_eta_basis",
        "session_seen_at",
        "rev",
    }
)
CHUNK = 500  # ids in one UPDATE's IN list
_TOUCHED = "gpuyard_touched_jobs"  # Session.info key: ids of job rows this transaction changed


def touch(s: Session, job_ids: Iterable[str]) -> None:
    """Count these job rows as changed by the transaction (for Core inserts and updates)."""
    s.info.setdefault(_TOUCHED, set()).update(job_ids)


def watch(sessions: sessionmaker[Session]) -> None:
    """Give the job rows each transaction of these sessions changes the next revision."""
    event.listen(sessions, "before_flush", _before_flush)
    event.listen(sessions, "before_commit", _before_commit)
    event.listen(sessions, "after_rollback", _forget)
    event.listen(sessions, "after_commit", _forget)


def _before_flush(s: Session, _context: Any, _instances: Any) -> None:
    touched = [row.id for row in s.new if isinstance(row, JobRow)]
    touched += [row.id for row in s.dirty if isinstance(row, JobRow) and _counted(row)]
    if touched:
        touch(s, touched)


def _counted(row: JobRow) -> bool:
    """Whether a column other than those not counted was set (`committed_state` holds the
    old value of each attribute set since the last flush)."""
    return any(key not in NOT_COUNTED for key in inspect(row).committed_state)


def _before_commit(s: Session) -> None:
    s.flush()  # what is still pending: its rows are touched too
    touched = s.info.pop(_TOUCHED, None)
    if not touched:
        return
    rev = s.execute(
        update(RevisionRow)
        .where(RevisionRow.name == JOBS_COUNTER)
        .values(n=RevisionRow.n + 1)
        .returning(RevisionRow.n)
    ).scalar_one()
    ids = sorted(touched)
    for at in range(0, len(ids), CHUNK):
        s.execute(
            update(JobRow)
            .where(JobRow.id.in_(ids[at : at + CHUNK]))
            .values(rev=rev)
            .execution_options(synchronize_session=False)
        )


def _forget(s: Session) -> None:
    s.info.pop(_TOUCHED, None)
