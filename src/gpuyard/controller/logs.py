"""Reading a task's log wherever it runs, with one error the API can explain.

The engine raises `NodeUnavailable` (the node left) or `AgentUnreachable` (its agent did not
answer in time); callers above the controller see `LogUnavailable` with a reason a user can
act on, never an engine error.
"""

from __future__ import annotations

from gpuyard.engine import AgentUnreachable, Engine, NodeUnavailable
from gpuyard.store import TaskRecord


class LogUnavailable(RuntimeError):
    """The task's log cannot be read now; the message says why."""


class TaskLogs:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def read(self, task: TaskRecord, offset: int, limit: int) -> bytes:
        try:
            return self._engine.read_log(task.node, task.key, offset, limit)
        except (NodeUnavailable, AgentUnreachable) as e:
            raise LogUnavailable(_reason(task, e)) from e

    def size(self, task: TaskRecord) -> int:
        try:
            return self._engine.log_size(task.node, task.key)
        except (NodeUnavailable, AgentUnreachable) as e:
            raise LogUnavailable(_reason(task, e)) from e

    def dropped(self, task: TaskRecord) -> int:
        """Bytes the task's log dropped to stay within its cap (runtime/logcap.py); 0 where
        it is whole, or cannot be asked now (a read of the log then says why)."""
        try:
            return self._engine.log_dropped(task.node, task.key)
        except (NodeUnavailable, AgentUnreachable):
            return 0

    def tail(self, task: TaskRecord, lines: int) -> str:
        try:
            return self._engine.tail_log(task.node, task.key, lines)
        except (NodeUnavailable, AgentUnreachable) as e:
            raise LogUnavailable(_reason(task, e)) from e


def _reason(task: TaskRecord, error: Exception) -> str:
    if isinstance(error, NodeUnavailable):
        return (
            f"the log of {task.role}/{task.index} is on node {task.node}, which has left the "
            "cluster; it can be read again if the node comes back"
        )
    return f"node {task.node} did not answer in time ({error}); try again"
