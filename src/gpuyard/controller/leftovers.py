"""Release what nodes still hold of tasks the store has ended.

A task's end is recorded in the store first and its node told to release it (delete its
state dir, free its network namespace, archive its log) after, so a server killed between
the two loses no end but leaves the task on its node, and nothing would ask for it again.
`LeftoverSweep` asks each node what it holds, on the first cycle of a term and every minute
after, and releases the keys whose task rows are final. A task the store does not know, or
still thinks live, is left alone.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from gpuyard.engine import Engine, NodeUnavailable
from gpuyard.model import Clock, Node
from gpuyard.store import Store, TaskRecord

SWEEP_INTERVAL_S = 60.0
log = logging.getLogger("gpuyard.controller")


def task_of(store: Store, key: str) -> TaskRecord | None:
    """The task row of `key` (`<job id>-a<attempt>-<role>-<index>`), None if unknown."""
    job_id = key.split("-", 1)[0]
    return next((t for t in store.jobs.tasks(job_id) if t.key == key), None)


class LeftoverSweep:
    def __init__(self, store: Store, engine: Engine, clock: Clock) -> None:
        self.store, self.engine, self.clock = store, engine, clock
        self._next = 0.0  # the first cycle sweeps

    def run(self, nodes: Sequence[Node]) -> list[str]:
        """Release the ended tasks the nodes still hold, when a sweep is due; their keys."""
        now = self.clock.now()
        if now < self._next:
            return []
        self._next = now + SWEEP_INTERVAL_S
        released = []
        for node in nodes:
            try:
                held = self.engine.held_tasks(node.name)
            except NodeUnavailable:
                continue  # asked again at the next sweep
            for key in held:
                task = task_of(self.store, key)
                if task is None or not task.state.is_final:
                    continue
                try:
                    self.engine.release(node.name, key)
                except Exception as e:  # noqa: BLE001 - one task's trouble stops no sweep
                    log.warning("could not release ended task %s on %s: %s", key, node.name, e)
                    continue
                released.append(key)
        if released:
            log.info("released %d ended tasks their nodes still held: %s", len(released),
                     ", ".join(released))  # fmt: skip
        return released
