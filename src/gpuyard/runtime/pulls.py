"""The image pulls of one node, in the background: `ContainerRuntime.start` never waits for one.

A task whose image is not ready joins the pull of that image (`PullQueue.wait_for`). Pulls are
bounded: a few worker threads (`PullPolicy.workers`), one pull per image name and registry
login at a time, shared by every task waiting for it with that login (a task never rides on
another's credentials), and a timeout per try. A try that fails for a transient
reason (`registryerrors.classify`) is tried again after an exponential backoff, up to
`PullPolicy.tries` tries; a permanent failure, or the last try, ends every waiting task. The
queue only calls back; the task dirs are the runtime's (`executor.py`, `pullwait.py`).

Workers are daemon threads and backoffs are timers, never a sleeping worker: a server that
exits does not wait for a registry, and a backoff holds up no other image's pull.
"""

from __future__ import annotations

import logging
import os
import queue
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from gpuyard.model.registries import RegistryLogin
from gpuyard.runtime.errors import ImageError
from gpuyard.runtime.registryerrors import classify

log = logging.getLogger("gpuyard.runtime.pulls")


def _env_number(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        log.warning("$%s is not a number; using %g", name, default)
        return default
    return value if value > 0 else default


@dataclass(frozen=True, slots=True)
class PullPolicy:
    workers: int = 3  # pulls at once on a node
    tries: int = 5  # per pull, the first included
    first_backoff_s: float = 2.0  # before the 2nd try; doubled for each later one
    max_backoff_s: float = 60.0
    timeout_s: float = 600.0  # one try (skopeo copy + unpack)

    @classmethod
    def from_env(cls) -> PullPolicy:
        """The defaults, or `$GPUYARD_IMAGE_PULL_` + `WORKERS`, `TRIES`, `BACKOFF_S`,
        `MAX_BACKOFF_S`, `TIMEOUT_S`."""
        d = cls()
        return cls(
            workers=int(_env_number("GPUYARD_IMAGE_PULL_WORKERS", d.workers)),
            tries=int(_env_number("GPUYARD_IMAGE_PULL_TRIES", d.tries)),
            first_backoff_s=_env_number("GPUYARD_IMAGE_PULL_BACKOFF_S", d.first_backoff_s),
            max_backoff_s=_env_number("GPUYARD_IMAGE_PULL_MAX_BACKOFF_S", d.max_backoff_s),
            timeout_s=_env_number("GPUYARD_IMAGE_PULL_TIMEOUT_S", d.timeout_s),
        )

    def backoff_s(self, failures: int) -> float:
        """The wait after `failures` failed tries: 2, 4, 8, ... s, at most `max_backoff_s`."""
        return min(self.max_backoff_s, self.first_backoff_s * 2 ** max(0, failures - 1))


@dataclass(frozen=True, slots=True)
class PullState:
    """Where the pull a task waits for stands: what its status says (`detail`)."""

    image: str
    verb: str  # "pulling", "unpacking" or "checking registry access to" (a private image)
    attempt: int = 1  # the try under way or next
    tries: int = 1
    last_error: str | None = None  # the kind of the last transient failure

    def detail(self) -> str:
        text = f"{self.verb} image {self.image}"
        if self.last_error is not None:
            text += f" (attempt {self.attempt}/{self.tries} after: {self.last_error})"
        return text


_RETRY = re.compile(r" \(attempt (\d+)/\d+ after: (.+)\)$")


def retry_of(detail: str) -> tuple[int, str] | None:
    """(the try under way, the kind of the failure before it) of a `PullState.detail()`
    that tells a retry; None for any other detail."""
    found = _RETRY.search(detail)
    return (int(found[1]), found[2]) if found else None


Failed = Callable[[str, str, bool], None]  # (task key, message, transient?)
PullKey = tuple[str, str]  # (image, fingerprint of its login or "")


@dataclass(eq=False)
class _Pull:
    image: str
    waiters: set[str] = field(default_factory=set)
    failures: int = 0
    last_error: str | None = None
    login: RegistryLogin | None = None

    @property
    def key(self) -> PullKey:
        return self.image, self.login.fingerprint() if self.login is not None else ""


class PullQueue:
    """One pull per image and login at a time; calls back `on_progress(key, state)` after a
    transient failure, then `on_ready(key)` or `on_failed(key, message, transient)` for each
    task still waiting (`transient`: the last of the tries failed for a transient reason)."""

    def __init__(
        self,
        # (image, timeout_s, login): pull (or check the login of a private image), unpack;
        # or raise
        fetch: Callable[[str, float, RegistryLogin | None], object],
        policy: PullPolicy,
        on_progress: Callable[[str, PullState], None],
        on_ready: Callable[[str], None],
        on_failed: Failed,
    ) -> None:
        self.policy = policy
        self._fetch = fetch
        self._on_progress, self._on_ready, self._on_failed = on_progress, on_ready, on_failed
        self._lock = threading.Lock()
        self._pulls: dict[PullKey, _Pull] = {}
        self._work: queue.SimpleQueue[PullKey | None] = queue.SimpleQueue()
        self._workers: list[threading.Thread] = []
        self._closed = False

    def wait_for(self, image: str, key: str, login: RegistryLogin | None = None) -> None:
        """Task `key` waits for `image`, pulled with `login`: joins that pull, or starts one."""
        new = _Pull(image, {key}, login=login)
        with self._lock:
            if self._closed:
                return
            pull = self._pulls.get(new.key)
            if pull is None:
                self._pulls[new.key] = new
                self._spawn_worker()
            else:
                pull.waiters.add(key)
                state = self._state(pull) if pull.failures else None
        if pull is None:
            self._work.put(new.key)
        elif state is not None:  # a pull between its tries: say so at once
            self._on_progress(key, state)

    def forget(self, key: str) -> None:
        """Task `key` waits no more (stopped); a pull nobody waits for is not tried again."""
        with self._lock:
            for pull in self._pulls.values():
                pull.waiters.discard(key)

    def waiting(self) -> dict[str, set[str]]:
        """Image → the tasks waiting for it (a copy)."""
        out: dict[str, set[str]] = {}
        with self._lock:
            for pull in self._pulls.values():
                out.setdefault(pull.image, set()).update(pull.waiters)
        return out

    def close(self) -> None:
        """Start no more pulls and call nothing back; a try under way ends by its timeout."""
        with self._lock:
            self._closed = True
            workers = len(self._workers)
        for _ in range(workers):
            self._work.put(None)

    def _state(self, pull: _Pull) -> PullState:
        return PullState(pull.image, "pulling", pull.failures + 1, self.policy.tries,
                         pull.last_error)

    def _spawn_worker(self) -> None:
        """One more worker while fewer than the policy's run (lock held)."""
        if len(self._workers) < self.policy.workers:
            worker = threading.Thread(target=self._serve, name="gpuyard-pull", daemon=True)
            self._workers.append(worker)
            worker.start()

    def _serve(self) -> None:
        while (key := self._work.get()) is not None:
            self._try(key)

    def _try(self, pull_key: PullKey) -> None:
        with self._lock:
            pull = self._pulls.get(pull_key)
            if pull is None or self._closed:
                return
            if not pull.waiters:  # every task waiting for it was stopped
                del self._pulls[pull_key]
                return
        image = pull.image
        try:
            self._fetch(image, self.policy.timeout_s, pull.login)
        except Exception as e:  # whatever it is, no task may wait for this pull for ever
            self._failed(pull, str(e) if isinstance(e, ImageError) else f"{image}: {e!r}")
            return
        for key in self._finish(pull):
            _safely(self._on_ready, key)

    def _finish(self, pull: _Pull) -> list[str]:
        """Drop the pull; the tasks that still wait for it (none once closed)."""
        with self._lock:
            self._pulls.pop(pull.key, None)
            return [] if self._closed else sorted(pull.waiters)

    def _failed(self, pull: _Pull, message: str) -> None:
        transient, kind = classify(message, pull.image)
        with self._lock:
            pull.failures += 1
        if not transient or pull.failures >= self.policy.tries:
            if transient:
                tries = "1 try" if pull.failures == 1 else f"{pull.failures} tries"
                message = f"{tries} failed ({kind}); the last: {message}"
            for key in self._finish(pull):
                _safely(self._on_failed, key, message, transient)
            return
        with self._lock:
            pull.last_error = kind
            state = self._state(pull)
            waiters = [] if self._closed else sorted(pull.waiters)
        for key in waiters:
            _safely(self._on_progress, key, state)
        delay = self.policy.backoff_s(pull.failures)
        log.info("pull of %s failed (%s); try %d/%d in %gs: %s", pull.image, kind,
                 pull.failures + 1, self.policy.tries, delay, message)
        timer = threading.Timer(delay, self._work.put, (pull.key,))
        timer.daemon = True
        timer.start()


def _safely(callback: Callable[..., None], *args: object) -> None:
    """Call back for one task; a failure is logged and ends neither the worker nor the rest."""
    try:
        callback(*args)
    except Exception:
        log.exception("image pull: the call back for %s failed", args[0])
