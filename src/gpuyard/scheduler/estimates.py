"""Run-time estimates learned from history (Helios-style): how long a job will run, from the
run times of its user's earlier jobs of the same name, else of the same user.

Pure and in memory. The live controller feeds it finished jobs from the store, the simulator
feeds it the trace's jobs as they end; both read `estimate()` when they build a demand. An
estimate only orders backfill and start estimates: it never ends a job (maxRuntime does).
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass

NAME_WINDOW = 20  # runs of one (user, job name) kept
USER_WINDOW = 50  # runs of one user kept


@dataclass(frozen=True, slots=True)
class Estimate:
    """`seconds`: the median of `samples` earlier run times; `basis`: "name" (same user and
    job name) or "user" (same user, any name)."""

    seconds: float
    basis: str
    samples: int

    def describe(self) -> str:
        what = "of this name by this user" if self.basis == "name" else "by this user"
        return f"median of the last {self.samples} runs {what}"


class RuntimeEstimator:
    """Keeps the last run times per (tenant, user, name) and per (tenant, user)."""

    def __init__(self, name_window: int = NAME_WINDOW, user_window: int = USER_WINDOW) -> None:
        self._name_window, self._user_window = name_window, user_window
        self._by_name: dict[tuple[str, str, str], deque[float]] = {}
        self._by_user: dict[tuple[str, str], deque[float]] = {}

    def observe(self, tenant: str, user: str | None, name: str | None, runtime_s: float) -> None:
        """A job of `user` named `name` ran `runtime_s` seconds in all (a job without a user
        teaches nothing: its estimate would be the tenant's, which predicts little)."""
        if user is None or runtime_s < 0:
            return
        if name:
            key = (tenant, user, name)
            runs = self._by_name.get(key)
            if runs is None:
                runs = self._by_name[key] = deque(maxlen=self._name_window)
            runs.append(runtime_s)
        runs = self._by_user.get((tenant, user))
        if runs is None:
            runs = self._by_user[tenant, user] = deque(maxlen=self._user_window)
        runs.append(runtime_s)

    def estimate(self, tenant: str, user: str | None, name: str | None) -> Estimate | None:
        if user is None:
            return None
        runs = self._by_name.get((tenant, user, name)) if name else None
        if runs:
            return Estimate(statistics.median(runs), "name", len(runs))
        runs = self._by_user.get((tenant, user))
        if runs:
            return Estimate(statistics.median(runs), "user", len(runs))
        return None
