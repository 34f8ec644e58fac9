"""Asking every Ray node's agent for its readings at once, with a bound on the wait.

At a scrape of `/metrics` (and every few seconds for the idle-GPU checks) the control plane
asks each node's `AgentActor.readings` (its own NVML and its tasks' cgroups) in parallel and
waits at most `timeout_s` for all of them. A node whose agent did not answer in time, is dead
or restarting has no readings (None): its series are left out of that scrape, which Prometheus
marks stale, and `gpuyard_node_scrape_up{node}` says 0 (docs/observability.md#every-node).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import ray
from ray.exceptions import RayActorError, RayTaskError

from gpuyard.runtime.nodereadings import NodeReadings

log = logging.getLogger("gpuyard.engine.nodemetrics")


def gather_readings(actors: Mapping[str, Any], timeout_s: float) -> dict[str, NodeReadings | None]:
    """Node name → its agent's readings, or None for one that did not answer in `timeout_s`."""
    refs = {name: actor.readings.remote() for name, actor in actors.items()}
    if not refs:
        return {}
    ready, late = ray.wait(list(refs.values()), num_returns=len(refs), timeout=timeout_s)
    answered = set(ready)
    out: dict[str, NodeReadings | None] = {}
    for name, ref in refs.items():
        out[name] = _result(name, ref) if ref in answered else None
        if ref not in answered:
            log.warning("agent of %s gave no readings within %gs", name, timeout_s)
    for ref in late:  # nobody waits for them any more: drop them if they have not begun
        try:
            ray.cancel(ref)
        except Exception as e:  # an answer that came meanwhile, an actor gone: nothing to do
            log.debug("could not cancel a late readings call: %s", e)
    return out


def _result(name: str, ref: Any) -> NodeReadings | None:
    try:
        return ray.get(ref, timeout=0)
    except (RayActorError, RayTaskError) as e:
        log.warning("agent of %s could not give its readings: %s", name, e)
        return None
