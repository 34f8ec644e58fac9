"""A bounded queue of notifications that one background thread sends, each tried again with
exponential backoff up to a cap: what job webhooks (`webhooks.py`) and job e-mails
(`mailer.py`) share, so that the controller only ever enqueues and never waits on a network.

When the queue is full its oldest item is dropped (`_dropped`). A send (`_attempt`) answers
None when the item is done with (sent, or refused for good) or a sentence saying why it
failed; a failed item is due again after `backoff_s * 2**(attempts-1)` (at most
`max_backoff_s`), until `max_attempts` in all (`_gave_up`).
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Retry:
    """How a queue retries: its size, the attempts in all, the backoff's start and cap."""

    max_queue: int = 1000
    max_attempts: int = 5
    backoff_s: float = 1.0
    max_backoff_s: float = 60.0


@dataclass(frozen=True, slots=True)
class Queued(Generic[T]):
    item: T
    attempt: int = 0  # attempts made so far
    due: float = 0.0  # monotonic time of the next attempt


class RetryQueue(ABC, Generic[T]):
    thread_name = "gpuyard-sender"

    def __init__(
        self,
        *,
        max_queue: int = 1000,
        max_attempts: int = 5,
        backoff_s: float = 1.0,
        max_backoff_s: float = 60.0,
    ) -> None:
        self._max_queue = max_queue
        self._max_attempts = max_attempts
        self._backoff_s = backoff_s
        self._max_backoff_s = max_backoff_s
        self._queue: deque[Queued[T]] = deque()
        self._cond = threading.Condition()
        self._halt = False
        self._thread: threading.Thread | None = None

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue)

    def put(self, item: T) -> None:
        """Queue an item, due now; never blocks (a full queue drops its oldest)."""
        self._put(Queued(item, 0, time.monotonic()))

    def start(self) -> None:
        with self._cond:
            if self._thread is not None:
                return
            self._halt = False
            self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
            self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        with self._cond:
            self._halt = True
            self._cond.notify_all()
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout_s)

    # -- what a sender says ------------------------------------------------------------

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        """What every attempt of the thread's life shares (an HTTP client); none by default."""
        yield None

    @abstractmethod
    def _attempt(self, connection: Any, item: T) -> str | None:
        """Deliver `item` once: None when done, else what went wrong (it is retried)."""

    def _dropped(self, item: T) -> None:
        """The queue was full: `item` (its oldest) is dropped."""

    def _queued(self, length: int) -> None:
        """The queue's length changed."""

    def _retrying(self, item: T, attempt: int, problem: str, delay: float) -> None:
        """Attempt `attempt` of `item` failed; it is tried again in `delay` s."""

    def _gave_up(self, item: T, attempts: int, problem: str) -> None:
        """`item` failed `attempts` times, the most allowed: it is not tried again."""

    # -- the thread --------------------------------------------------------------------

    def _put(self, q: Queued[T]) -> None:
        with self._cond:
            if len(self._queue) >= self._max_queue:
                self._dropped(self._queue.popleft().item)
            self._queue.append(q)
            self._queued(len(self._queue))
            self._cond.notify_all()

    def _run(self) -> None:
        with self._connection() as connection:
            while (q := self._next()) is not None:
                self._try(connection, q)

    def _next(self) -> Queued[T] | None:
        """The next due item (waiting for one), or None once stopped."""
        with self._cond:
            while not self._halt:
                now = time.monotonic()
                due = [q for q in self._queue if q.due <= now]
                if due:
                    self._queue.remove(due[0])
                    self._queued(len(self._queue))
                    return due[0]
                wait = min((q.due for q in self._queue), default=now + 60) - now
                self._cond.wait(max(0.01, wait))
            return None

    def _try(self, connection: Any, q: Queued[T]) -> None:
        attempt = q.attempt + 1
        problem = self._attempt(connection, q.item)
        if problem is None:
            return
        if attempt >= self._max_attempts:
            self._gave_up(q.item, attempt, problem)
            return
        delay = min(self._max_backoff_s, self._backoff_s * 2 ** (attempt - 1))
        self._retrying(q.item, attempt, problem, delay)
        self._put(replace(q, attempt=attempt, due=time.monotonic() + delay))
