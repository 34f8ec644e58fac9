"""API-shaped sample answers (docs/api.md) and helpers shared by the CLI tests.

Not a conftest.py: pytest swaps `conftest` modules in and out of sys.modules, so tests
import this module by its own, unique name.
"""

from __future__ import annotations

import socket
from datetime import UTC, datetime
from typing import Any

NOW = datetime(2026, 11, 22, 1, 10, 0, tzinfo=UTC)


def gpu(index: int, fake: bool = True, gpu_type: str = "H100") -> dict[str, Any]:
    return {"index": index, "uuid": f"GPU-{index}", "type": gpu_type, "fake": fake}


def task(attempt: int, state: str, started: bool = True, **extra: Any) -> dict[str, Any]:
    base = {
        "role": "worker", "index": 0, "attempt": attempt, "state": state, "node": "node-1",
        "gpus": [gpu(0), gpu(1)], "exitCode": None, "reason": None, "message": None,
        "startedAt": "2026-11-22T01:05:00.000Z" if started else None, "finishedAt": None,
    }
    return base | extra


def job(state: str = "RUNNING", **extra: Any) -> dict[str, Any]:
    base = {
        "id": "j-7f3a", "name": "mnist-train", "tenant": "vision", "state": state,
        "priority": 10, "attempt": 1, "retryCount": 3, "retriesUsed": 0, "gpus": 2,
        "submittedAt": "2026-11-22T01:07:00.000Z", "startedAt": None, "finishedAt": None,
        "reason": None, "pendingReason": None, "tasks": [], "events": [],
    }
    return base | extra


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on: connecting to it is refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
