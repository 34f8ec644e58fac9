"""Warming a node's images: pulls asked for ahead of any task (`gpuyard image pull --node`, and
the controller's pre-pulls of queued jobs' images), in the node's own pull queue.

A warm joins the node's `PullQueue` as a waiter of its own, keyed `warm:<image>` (a key no task
can have: task keys allow no `:`), so a task without a registry login that starts on that image
meanwhile joins the same pull, and a warm asked while a task's pull is under way says `pulling`
and starts none: one `skopeo copy` per image and node, however many ask. The pull is
`ImageStore.resolve` (pull and unpack), so a task that starts afterwards finds its image ready
and launches at once ("image present").

A warm carries no login, ever: its pull is anonymous (an auth file with no entry), so what it
stores is public, since anyone could pull it; it never joins a task's pull (keyed by that
task's login too), it only says `pulling` while one is under way. A private image already here
(pulled with some task's login) is `present` for a warm, as its files are; a task may still use
it only once the registry has let that task's own login read it (imageaccess.py). So a warm
never makes a private image usable by anyone.

Bounded: at most `max_warming` warms wait at once on a node (more are refused, `busy`, and the
controller asks again later); a warm that failed is not tried again for `retry_after_s` (the
pull queue already retried transient failures), so a queued job's bad image costs one pull, not
one a cycle.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from gpuyard.runtime.errors import ImageError
from gpuyard.runtime.images import ImageStore, normalize
from gpuyard.runtime.pulls import PullQueue

WARM_PREFIX = "warm:"
MAX_WARMING = 4  # warms waiting at once on a node (they share its pull workers with tasks)
RETRY_AFTER_S = 600.0  # a failed warm of an image is not asked again before this

PRESENT, PULLING, BUSY, FAILED = "present", "pulling", "busy", "failed"


@dataclass(frozen=True, slots=True)
class WarmState:
    """Where an image stands on this node: `present` (ready to mount), `pulling` (a pull or an
    unpack is under way), `busy` (not started: too many warms wait), `failed` (`message`)."""

    image: str
    state: str
    message: str | None = None


def is_warm_key(key: str) -> bool:
    return key.startswith(WARM_PREFIX)


class ImageWarmer:
    """The warms of one node. `done(key, error)` is the pull queue's call back for warm keys
    (the runtime's `WaitingTasks` forwards them)."""

    def __init__(self, images: ImageStore, pulls: PullQueue, max_warming: int = MAX_WARMING,
                 retry_after_s: float = RETRY_AFTER_S) -> None:
        self.images = images
        self._pulls = pulls
        self.max_warming = max_warming
        self.retry_after_s = retry_after_s
        self._lock = threading.Lock()
        self._warming: set[str] = set()
        self._failed: dict[str, tuple[float, str]] = {}  # image → (when, why)

    def warm(self, ref: str, retry_failed: bool = False) -> WarmState:
        """Have `ref` pulled and unpacked here in the background (at once if it is not ready
        and no warm of it failed lately, or `retry_failed`: an admin's explicit pull); where it
        stands. ImageError: a bad reference, or pulling is off here."""
        image = normalize(ref)
        if self.images.fetch_needed(image) is None:
            return WarmState(image, PRESENT)
        with self._lock:
            failed = self._failed.get(image)
            recent = failed is not None and time.monotonic() - failed[0] < self.retry_after_s
            if failed is not None and recent and not retry_failed:
                return WarmState(image, FAILED, failed[1])
            if image in self._warming or self._joined_by_task(image):
                return WarmState(image, PULLING)
            if len(self._warming) >= self.max_warming:
                return WarmState(image, BUSY, f"{self.max_warming} images are being warmed")
            self._warming.add(image)
            self._failed.pop(image, None)
        self._pulls.wait_for(image, WARM_PREFIX + image)
        return WarmState(image, PULLING)

    def state(self, ref: str) -> WarmState:
        """Where `ref` stands here, without asking for anything."""
        image = normalize(ref)
        try:
            needed = self.images.fetch_needed(image)
        except ImageError as e:  # pulling is off and it is missing
            return WarmState(image, FAILED, str(e))
        if needed is None:
            return WarmState(image, PRESENT)
        with self._lock:
            if image in self._warming or self._joined_by_task(image):
                return WarmState(image, PULLING)
            failed = self._failed.get(image)
        return WarmState(image, FAILED, failed[1]) if failed else WarmState(image, "absent")

    def done(self, key: str, error: str | None) -> None:
        """The pull a warm waited for ended: ready (`error` None) or failed for good."""
        image = key[len(WARM_PREFIX):]
        with self._lock:
            self._warming.discard(image)
            if error is not None:
                self._failed[image] = (time.monotonic(), error)

    def _joined_by_task(self, image: str) -> bool:
        return bool(self._pulls.waiting().get(image))
