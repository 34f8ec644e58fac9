"""Leadership (docs/ha.md): which of the servers on one database runs the controller.

Every server serves the API; one leads. `Leadership` runs a thread that tries for the lease
(`lease.py`) every `poll_s` while it follows and renews it every `renew_s` while it leads,
waiting meanwhile on the lock connection for a follower's wake-up (PostgreSQL NOTIFY: a
submission or a cancel taken by a follower reaches the leader's cycle at once). When it wins
it calls `elected(term)` on a thread of its own (the server builds its engine, which adopts
the running tasks, and starts the controller).

The controller asks `acting()` before each cycle and before it tells nodes to start tasks:
True only while the lease is held (its deadline not passed), and the asking thread's
transactions are fenced from then on (`lease.Fence`). A leader that finds its lease lost
(a heartbeat refused or failed, or its deadline passed) stops at once: `on_lost` ends the
process (exit code 3), to be restarted by its supervisor as a follower; it closes nothing
that the new leader may be using (the node's task network, the tasks' dirs).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from gpuyard.controller.lease import Fence, Lease
from gpuyard.metrics import Instruments
from gpuyard.store.lease import LeaseInfo, notify_wake

log = logging.getLogger("gpuyard.leader")

POLL_S = 0.5  # a follower tries for the lease this often
RENEW_S = 1.0  # the leader's heartbeat
LOST_EXIT_CODE = 3


def exit_process(reason: str) -> None:
    """The default `on_lost`: a leader that lost its lease must stop acting now, and a clean
    shutdown would close what the new leader uses; so, like a kill -9, the process ends."""
    log.critical("lost the leader lease (%s): exiting", reason)
    logging.shutdown()
    os._exit(LOST_EXIT_CODE)


class Leadership:
    def __init__(
        self,
        lease: Lease,
        fence: Fence,
        instruments: Instruments,
        *,
        on_lost: Callable[[str], None] = exit_process,
        wake_engine: Engine | None = None,  # PostgreSQL: the store's, to NOTIFY the leader
        poll_s: float = POLL_S,
        renew_s: float = RENEW_S,
    ) -> None:
        self.lease = lease
        self.fence = fence
        self.instruments = instruments
        self.on_lost = on_lost
        self.poll_s, self.renew_s = poll_s, renew_s
        self.elected: Callable[[int], None] | None = None  # set by the server
        self.on_wake: Callable[[], None] | None = None  # the controller's local wake-up
        self.leading = False
        self.elected_at: float | None = None  # time.time() of this server's election
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None
        self._waker = _Waker(wake_engine) if wake_engine is not None else None
        self._lost_once = threading.Lock()

    # ---- the server's calls ------------------------------------------------------------

    def try_lead(self) -> bool:
        """One synchronous try (at start, before the API serves): True if this server leads."""
        return self._try(background=False) is not None

    def start(self) -> None:
        if self._waker is not None:
            self._waker.start()
        self._thread = threading.Thread(target=self._run, name="gpuyard-leader", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop contending and renewing (the server is shutting down); `release` after the
        controller and the engine are closed lets a follower take over at once."""
        self._halt.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._waker is not None:
            self._waker.stop()

    def release(self) -> None:
        self.leading = False
        self.lease.release()

    def current(self) -> LeaseInfo | None:
        try:
            return self.lease.current()
        except SQLAlchemyError as e:
            log.warning("could not read the leader lease: %s", e)
            return None

    # ---- the controller's calls --------------------------------------------------------

    def acting(self) -> bool:
        """May this server act now (the controller's gate)? Fences the asking thread."""
        if not self.leading:
            return False
        self.fence.mark()
        if not self.lease.holding():
            self._lose("its deadline passed without a heartbeat")
            return False
        return True

    def wake_leader(self) -> None:
        """A follower took a submission or a cancel: have the leader's cycle run now."""
        if not self.leading and self._waker is not None:
            self._waker.wake()

    # ---- the thread --------------------------------------------------------------------

    def _run(self) -> None:
        last_renew = time.monotonic()
        while not self._halt.is_set():
            if not self.leading:
                if self._try() is None:
                    self._halt.wait(self.poll_s)
                last_renew = time.monotonic()
                continue
            wait = max(0.0, last_renew + self.renew_s - time.monotonic())
            if self.lease.wait_wake(wait) and self.on_wake is not None:
                self.on_wake()
            if time.monotonic() - last_renew >= self.renew_s and not self._halt.is_set():
                last_renew = time.monotonic()
                if not self.lease.renew():
                    self._lose("its heartbeat was refused or failed")
                    return

    def _try(self, background: bool = True) -> int | None:
        """One try for the lease; once won, `elected(term)` on a thread of its own (so that
        the heartbeat goes on), or in this one (`background=False`: the server's start)."""
        term = self.lease.acquire()
        if term is None:
            return None
        self.leading = True
        self.elected_at = time.time()
        self.instruments.leader.set(1)
        self.instruments.leader_term.set(term)
        if self.elected is not None and background:
            threading.Thread(
                target=self._take_over, args=(term,), name="gpuyard-elected", daemon=True
            ).start()
        elif self.elected is not None:
            self._take_over(term)
        return term

    def _take_over(self, term: int) -> None:
        assert self.elected is not None
        try:
            self.elected(term)
        except Exception as e:  # could not set up to lead: let another server do it
            log.exception("could not take over as the leader")
            self._lose(f"taking over failed: {e}")

    def _lose(self, reason: str) -> None:
        if not self._lost_once.acquire(blocking=False):
            return
        self.leading = False
        self.instruments.leader.set(0)
        self.on_lost(reason)


class _Waker:
    """A follower's wake-ups for the leader, coalesced: one NOTIFY per burst, sent from a
    thread of its own so that a submission never waits on it."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._event = threading.Event()
        self._halt = False
        self._thread = threading.Thread(target=self._run, name="gpuyard-waker", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        self._event.set()

    def stop(self) -> None:
        self._halt = True
        self._event.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            self._event.wait()
            self._event.clear()
            if self._halt:
                return
            try:
                with self._engine.connect() as conn:
                    notify_wake(conn)
                    conn.commit()
            except SQLAlchemyError as e:  # the leader's cycle still runs every interval
                log.warning("could not wake the leader: %s", e)
