"""`gpuyard jobs` as a tree: a job array's children under one row for their parent.

`job_tree` turns a page of `GET /api/v1/jobs` (its `jobs` and the `arrays` their children
belong to) into the rows both tables print (the fast path's and the full one's): each array
once, where its newest child on the page was, its state the summary of all its children and
its note their counts; with `expand` its children follow, indented. Standard library only
(it runs on the fast path).
"""

from __future__ import annotations

Row = dict[str, object]  # a job (or a parent) as the API gives it; no `typing`: fast path
INDENT = "  └ "
STATE_ORDER = ("RUNNING", "SCHEDULED", "QUEUED", "SUCCEEDED", "FAILED", "STOPPED")


def counts_text(array: Row) -> str:
    """`array 0-19%4: 4 RUNNING, 12 QUEUED, 4 SUCCEEDED`."""
    counts = array.get("counts")
    counts = counts if isinstance(counts, dict) else {}
    parts = [f"{counts[s]} {s}" for s in STATE_ORDER if counts.get(s)]
    return f"array {array.get('expression', '?')}: {', '.join(parts) or 'no children'}"


def parent_row(array: Row) -> Row:
    """A row in the jobs table's terms (the columns read these keys)."""
    return {
        "id": array.get("id"),
        "name": array.get("name"),
        "tenant": array.get("tenant"),
        "state": array.get("state"),
        "gpus": None,
        "attempt": f"{array.get('size', 0)} jobs",
        "submittedAt": array.get("submittedAt"),
        "reason": counts_text(array),
    }


def child_row(job: Row) -> Row:
    return {
        **job,
        "id": f"{INDENT}{job.get('id')}",
        "name": f"{job.get('name')}[{job.get('arrayIndex')}]",
    }


def job_tree(jobs: list[Row], arrays: list[Row] | None, expand: bool = False) -> list[Row]:
    """The rows to print, in the page's order."""
    by_id = {a.get("id"): a for a in arrays or []}
    children: dict[str, list[Row]] = {}
    for job in jobs:
        if job.get("arrayId") in by_id:
            children.setdefault(str(job["arrayId"]), []).append(job)
    rows: list[Row] = []
    for job in jobs:
        array_id = job.get("arrayId")
        if array_id not in by_id:
            rows.append(job)
            continue
        if array_id in children:  # the first child of this array met: the whole group here
            group = children.pop(str(array_id))
            rows.append(parent_row(by_id[array_id]))
            if expand:
                ordered = sorted(group, key=lambda j: int(str(j.get("arrayIndex") or 0)))
                rows.extend(child_row(j) for j in ordered)
    return rows
