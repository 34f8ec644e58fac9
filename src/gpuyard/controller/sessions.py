"""Sessions into running tasks (exec, port connections) wherever the task runs, with one
error the API can explain.

The engine answers a node's streams (`Engine.streams`); a session here is one of them bound
to its id. Every failure — the task is not running, its node left or did not answer, the
runtime refused, the stream ended — is `SessionUnavailable` with a sentence a user can act on.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from gpuyard.engine import AgentUnreachable, Engine, NodeUnavailable
from gpuyard.engine.base import TaskStreams
from gpuyard.model import TaskState
from gpuyard.runtime.streams import StreamGone
from gpuyard.runtime.taskexec import ExecError
from gpuyard.store import TaskRecord

FAILURES = (NodeUnavailable, AgentUnreachable, ExecError, StreamGone, OSError)


class SessionUnavailable(RuntimeError):
    """The session cannot be opened or went away; the message says why."""


@dataclass(frozen=True)
class Session:
    """One open exec or port stream on a node."""

    streams: TaskStreams
    sid: str
    what: str  # "exec in main/0": for messages
    task: str  # its task, role/index

    def read(self, wait_s: float) -> list[tuple[int, bytes]]:
        """Frames (channel, bytes) within `wait_s`; channel 3 is the end (runtime/streams.py)."""
        try:
            return self.streams.read(self.sid, wait_s)
        except FAILURES as e:
            raise SessionUnavailable(f"{self.what} ended: {_words(e)}") from e

    def write(self, data: bytes) -> None:
        try:
            self.streams.write(self.sid, data)
        except FAILURES as e:
            raise SessionUnavailable(f"{self.what} ended: {_words(e)}") from e

    def close_input(self) -> None:
        try:
            self.streams.close_input(self.sid)
        except FAILURES as e:
            raise SessionUnavailable(f"{self.what} ended: {_words(e)}") from e

    def resize(self, rows: int, cols: int) -> None:
        try:
            self.streams.resize(self.sid, rows, cols)
        except FAILURES as e:
            raise SessionUnavailable(f"{self.what} ended: {_words(e)}") from e

    def close(self) -> None:
        """End it (killing the command); quietly, whatever state it is in."""
        with contextlib.suppress(*FAILURES):
            self.streams.close(self.sid)


class TaskSessions:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def exec(self, task: TaskRecord, args: list[str], tty: bool, rows: int, cols: int) -> Session:
        streams = self._streams(task)
        try:
            sid = streams.open_exec(task.key, args, tty, rows, cols)
        except FAILURES as e:
            raise SessionUnavailable(f"cannot exec in {task.name}: {_words(e)}") from e
        return Session(streams, sid, f"exec in {task.name}", task.name)

    def port(self, task: TaskRecord, port: int) -> Session:
        streams = self._streams(task)
        try:
            sid = streams.open_port(task.key, port)
        except FAILURES as e:
            raise SessionUnavailable(f"cannot reach port {port} of {task.name}: {_words(e)}") from e
        return Session(streams, sid, f"port {port} of {task.name}", task.name)

    def _streams(self, task: TaskRecord) -> TaskStreams:
        if task.state != TaskState.RUNNING:
            raise SessionUnavailable(
                f"task {task.name} of job {task.job_id} is {str(task.state).lower()}, not "
                "running: exec and port-forward reach running tasks only"
            )
        try:
            return self._engine.streams(task.node)
        except (NodeUnavailable, AgentUnreachable) as e:
            raise SessionUnavailable(f"node {task.node} cannot be reached: {e}") from e


def _words(error: Exception) -> str:
    if isinstance(error, StreamGone):
        return "the session is closed (it ended, or was idle too long)"
    return str(error) or type(error).__name__
