"""`gpuyard submit --wait`: watch a job to its end, streaming its logs on the way.

While the job waits (QUEUED/SCHEDULED) a spinner shows its state and pending reason. When
an attempt runs, the logs of its default task are streamed to `out`; when a retry starts a
new attempt, that attempt's logs are followed too. Attempts that started and ended between
two polls are printed whole, so no attempt that produced logs is skipped.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import closing, nullcontext
from typing import Any, TextIO

from rich.console import Console
from rich.text import Text

from gpuyard.cli.client import ApiClient, ApiError
from gpuyard.cli.render import FINAL_STATES, wait_status

POLL_INTERVAL = 0.5
NOT_FOUND = 404


def attempt_started(tasks: list[dict[str, Any]], attempt: int) -> bool:
    """Whether any task of `attempt` got to run (so it may have logs)."""
    return any(
        t.get("attempt") == attempt and (t.get("startedAt") or t.get("state") == "RUNNING")
        for t in tasks
    )


def attempts_to_show(job: dict[str, Any], shown: set[int]) -> list[int]:
    """Attempts whose logs are due now, oldest first.

    Those that started and are not shown yet; while the job runs, also its current attempt.
    """
    tasks = job.get("tasks") or []
    current = job.get("attempt")
    attempts = {t["attempt"] for t in tasks if isinstance(t.get("attempt"), int)}
    due = {a for a in attempts if attempt_started(tasks, a)}
    if job.get("state") == "RUNNING" and isinstance(current, int):
        due.add(current)
    if isinstance(current, int):
        due = {a for a in due if a <= current}
    return sorted(due - shown)


def must_wait(job: dict[str, Any], shown: set[int]) -> bool:
    """Keep polling: not final, and nothing new to stream."""
    return job.get("state") not in FINAL_STATES and not attempts_to_show(job, shown)


class JobWatcher:
    """Follows one job; `run()` returns the job's final JobDetail."""

    def __init__(
        self,
        client: ApiClient,
        job_id: str,
        out: TextIO,
        err: Console,
        poll_interval: float = POLL_INTERVAL,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.client = client
        self.job_id = job_id
        self.out = out
        self.err = err
        self.poll_interval = poll_interval
        self.sleep = sleep
        self.shown: set[int] = set()
        self._last_line: str | None = None

    def run(self) -> dict[str, Any]:
        while True:
            job = self.wait_for_news()
            due = attempts_to_show(job, self.shown)
            if not due:
                return job
            for attempt in due:
                running = job.get("state") == "RUNNING" and attempt == job.get("attempt")
                self.print_logs(attempt, follow=running)

    def wait_for_news(self) -> dict[str, Any]:
        """Poll until the job ends or has an attempt to stream, with a spinner."""
        job = self.client.get_job(self.job_id)
        if not must_wait(job, self.shown):
            return job
        spinner = self.err.status(wait_status(job)) if self.err.is_terminal else nullcontext()
        with spinner as status:
            while must_wait(job, self.shown):
                self.report(job, status)
                self.sleep(self.poll_interval)
                job = self.client.get_job(self.job_id)
        return job

    def report(self, job: dict[str, Any], status: Any) -> None:
        """Update the spinner; without a terminal, print a line when the state changes."""
        line = wait_status(job)
        if status is not None:
            status.update(line)
        elif line.plain != self._last_line:
            self.err.print(line)
        self._last_line = line.plain

    def print_logs(self, attempt: int, follow: bool) -> None:
        """Copy one attempt's default-task logs to `out` (a 404 means it has none)."""
        if self.shown:
            self.err.rule(Text(f"attempt {attempt}", style="bold"), align="left")
        self.shown.add(attempt)
        self._last_line = None
        stream = self.client.stream_logs(self.job_id, attempt=attempt, follow=follow)
        try:
            with closing(stream):
                for chunk in stream:
                    self.out.write(chunk)
                    self.out.flush()
        except ApiError as exc:
            if exc.status != NOT_FOUND:
                raise
