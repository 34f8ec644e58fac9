"""Readers for the distributed-job fields of a task role: its ports and its completion policy.

- `ports: {label: count}` (OpenPAI's `resourcePerInstance.ports`): ports reserved for each task
  of the role on its node, named to the task as `PAI_PORT_LIST_<role>_<index>_<label>`. The
  label `master` is also what `MASTER_PORT` uses (rank 0 gets one even if not declared).
- `minFailedTasks` (OpenPAI `completion.minFailedInstances`): this many failed tasks of the role
  fail the job at once; -1 (or null in OpenPAI) never fails it by count. Default 1.
- `minSucceededTasks` (OpenPAI `completion.minSucceededInstances`): this many succeeded tasks of
  the role succeed the job at once (its other tasks are stopped); -1 or absent: every task
  must end. Both at most the role's taskNumber.
"""

from __future__ import annotations

import re

from gpuyard.spec.errors import Errors, got, join
from gpuyard.spec.fields import as_whole

PORT_LABEL_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}")
PORT_LABEL_RULE = "a letter, then letters, digits or _ (32 at most)"
MAX_PORTS_PER_TASK = 64
MASTER_PORT_LABEL = "master"
NEVER = -1  # minFailedTasks/minSucceededTasks: no count triggers


def read_ports(errs: Errors, path: str, value: object) -> tuple[tuple[str, int], ...] | None:
    """`{label: count}` → sorted (label, count) pairs; counts ≥ 1, 64 ports a task at most."""
    if not isinstance(value, dict):
        errs.add(path, f"must be a mapping of port labels to counts, like {{http: 1}}{got(value)}")
        return None
    out: list[tuple[str, int]] = []
    for label, raw in value.items():
        where = join(path, str(label))
        count = as_whole(raw)
        if not isinstance(label, str) or not PORT_LABEL_RE.fullmatch(label):
            errs.add(where, f"is not a valid port label: use {PORT_LABEL_RULE}")
        elif count is None or count < 1:
            errs.add(where, f"must be a whole number of ports ≥ 1{got(raw)}")
        else:
            out.append((label, count))
    total = sum(n for _, n in out)
    if total > MAX_PORTS_PER_TASK:
        errs.add(path, f"must ask for at most {MAX_PORTS_PER_TASK} ports a task, got {total}")
        return None
    return tuple(sorted(out))


def read_min_tasks(errs: Errors, path: str, value: object) -> int | None:
    """-1 (no count triggers) or a whole number ≥ 1; None after an error."""
    number = as_whole(value)
    if number is None or (number < 1 and number != NEVER):
        errs.add(path, f"must be a whole number ≥ 1, or -1 for none{got(value)}")
        return None
    return number


def check_min_tasks(errs: Errors, path: str, fields: dict) -> None:
    """minFailedTasks / minSucceededTasks may not exceed the role's taskNumber."""
    tasks = fields.get("task_number")
    if not isinstance(tasks, int):
        return
    for key, attr in (("minFailedTasks", "min_failed"), ("minSucceededTasks", "min_succeeded")):
        n = fields.get(attr)
        if isinstance(n, int) and n > tasks:
            errs.add(
                join(path, key),
                f"must be at most the role's number of tasks ({tasks}), or -1, got {n}",
            )
