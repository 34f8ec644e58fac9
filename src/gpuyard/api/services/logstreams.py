"""Log streams without harm to the API: their file and database reads run in worker threads
(never on the event loop), and each user may follow at most a few logs at once.

`LogStreams` is per app (`app.state.log_streams`; `gpuyard up --log-follows-per-user`). Its
reads share one thread limiter of their own, so slow or stuck reads (a hung network disk)
hold up other log streams only, never the threads the API's other endpoints run in. A follow
claims a slot of its user (`claim`: `TooManyFollows` beyond the cap, answered 429) and gives
it back when its stream ends, is cancelled (the client left) or is dropped unstarted.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.to_thread

DEFAULT_FOLLOWS_PER_USER = 8
READER_THREADS = 16

T = TypeVar("T")


class TooManyFollows(Exception):
    """The user follows as many logs as allowed already (HTTP 429)."""


class Claim:
    """One follow slot of one user, given back once (`release`, also on garbage collection of
    the stream it is `bind`-ed to)."""

    def __init__(self, streams: LogStreams, user: str) -> None:
        self._streams = streams
        self._user = user
        self._released = False

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._streams.give_back(self._user)

    def bind(self, stream: object) -> None:
        weakref.finalize(stream, self.release)


class LogStreams:
    def __init__(self, follows_per_user: int = DEFAULT_FOLLOWS_PER_USER) -> None:
        if follows_per_user < 1:
            raise ValueError("follows per user must be at least 1")
        self.follows_per_user = follows_per_user
        self._lock = threading.Lock()
        self._following: dict[str, int] = {}
        self._readers: anyio.CapacityLimiter | None = None

    def claim(self, user: str) -> Claim:
        with self._lock:
            count = self._following.get(user, 0)
            if count >= self.follows_per_user:
                raise TooManyFollows(
                    f"{user} follows {count} logs already, the most one user may follow at "
                    "once; stop one (or read without follow=true)"
                )
            self._following[user] = count + 1
        return Claim(self, user)

    def following(self, user: str) -> int:
        with self._lock:
            return self._following.get(user, 0)

    def give_back(self, user: str) -> None:
        with self._lock:
            left = self._following.get(user, 0) - 1
            if left > 0:
                self._following[user] = left
            else:
                self._following.pop(user, None)

    async def read(self, fn: Callable[..., T], *args: object) -> T:
        """`fn(*args)` in a worker thread of the log readers (made in the app's event loop)."""
        if self._readers is None:
            self._readers = anyio.CapacityLimiter(READER_THREADS)
        return await anyio.to_thread.run_sync(fn, *args, limiter=self._readers)
