"""Plain-text rendering for the fast path (`gpuyard.cli.fast`): the `gpuyard jobs` table, a
rejected spec, the hints after a submit. Same columns and words as the rich renderers of
`gpuyard.cli.render`, without rich's 50 ms import; ANSI colour only when asked.
"""

from __future__ import annotations

from datetime import datetime

from gpuyard.cli.times import NONE, relative_time

COLUMNS = ("ID", "NAME", "TENANT", "STATE", "GPUS", "ATTEMPT", "SUBMITTED", "REASON/PENDING")
OPP = "OPP"
OPP_MEANS = (
    "opportunistic, runs on GPUs borrowed beyond its tenant's guarantee; "
    "may be preempted when the lender reclaims them"
)
ANSI = {
    "QUEUED": "33", "SCHEDULED": "36", "RUNNING": "1;34", "SUCCEEDED": "1;32",
    "FAILED": "1;31", "STOPPED": "35",
}


def cell(value: object) -> str:
    return NONE if value is None or value == "" else str(value)


def attempt_cell(job: dict[str, object]) -> str:
    """`3`, or `3 (2 preempted)` for a job preempted before (requeued, not a retry)."""
    attempt, preempted = cell(job.get("attempt")), job.get("preemptions") or 0
    return f"{attempt} ({preempted} preempted)" if preempted else attempt


def basis_words(job: dict[str, object]) -> str:
    """What a queued job's estimated start rests on (`the run times of 3 running jobs: 2 by
    maxRuntime, 1 learned from history`); "" without an estimate."""
    return str(job.get("estimatedStartBasis") or "") if job.get("estimatedStart") else ""


def state_cell(job: dict[str, object]) -> str:
    state = cell(job.get("state"))
    return f"{state} {OPP}" if job.get("opportunistic") else state


def note_cell(job: dict[str, object]) -> str:
    """Why a job ended (its reason) or why it waits (its pending reason)."""
    return str(job.get("reason") or job.get("pendingReason") or "")


def job_row(job: dict[str, object], now: datetime | None = None) -> list[str]:
    return [
        cell(job.get("id")), cell(job.get("name")), cell(job.get("tenant")), state_cell(job),
        cell(job.get("gpus")), attempt_cell(job),
        relative_time(job.get("submittedAt"), now), note_cell(job),
    ]


def paint(text: str, state: str, color: bool) -> str:
    code = ANSI.get(state)
    return f"\x1b[{code}m{text}\x1b[0m" if color and code else text


def jobs_table(
    jobs: list[dict[str, object]], color: bool = False, now: datetime | None = None
) -> str:
    """The `gpuyard jobs` table: columns two spaces apart, the last one left ragged."""
    if not jobs:
        return "no jobs\n"
    rows = [list(COLUMNS), *(job_row(job, now) for job in jobs)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS) - 1)]
    lines = []
    for n, row in enumerate(rows):
        cells = [value.ljust(width) for value, width in zip(row, widths, strict=False)]
        if n:
            cells[3] = paint(cells[3], str(jobs[n - 1].get("state")), color)
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    if any(job.get("opportunistic") for job in jobs):
        lines.append(f"{OPP}: {OPP_MEANS}")
    return "\n".join(lines) + "\n"


def spec_errors_text(detail: str, errors: list[dict[str, object]]) -> str:
    """A 422: the server's sentence, then one `path: message` line per field error."""
    lines = [f"spec rejected: {detail}"]
    lines += [f"  • {e.get('path') or '(spec)'}: {e.get('message', '')}" for e in errors]
    return "\n".join(lines) + "\n"


def submitted_text(job: dict[str, object]) -> str:
    """Hints after a submit (the id itself goes to stdout, alone, for scripts)."""
    job_id = job.get("id", "?")
    return f"  see it:  gpuyard show {job_id}\n  logs:    gpuyard logs {job_id} -f\n"
