"""The run times the controller learns: a `RuntimeEstimator` loaded from the store's
succeeded jobs when the controller is built and fed each job that succeeds after, and the
expected run time the view gives each queued and running job.

What is learned is a succeeded job's run time summed over its attempts (`UsageRepo.run_times`:
first task start to last task end of each attempt): the work a run of that job needs, with
the time lost to preemptions and retries counted in. Failed and stopped jobs teach nothing:
how soon a job fails says little about how long its next run succeeds in.
"""

from __future__ import annotations

from gpuyard.scheduler.estimates import Estimate, RuntimeEstimator
from gpuyard.store import JobRecord, Store


class LearnedRuntimes:
    def __init__(self, store: Store) -> None:
        self._store = store
        self.estimator = RuntimeEstimator()
        self.learned = 0  # run times learned so far (loaded and fed)
        # estimates asked since the last run time learned: the view asks for every running
        # job each cycle, and a median each time costs ~3 µs (30 ms a cycle at 10k jobs)
        self._memo: dict[tuple[str, str | None, str], Estimate | None] = {}
        for run in store.usage.run_times():
            self._learn(run.tenant, run.owner, run.name, run.runtime_s)

    def job_succeeded(self, job: JobRecord) -> None:
        """Learn the run time of a job that just succeeded."""
        for run in self._store.usage.run_times([job.id]):
            self._learn(run.tenant, run.owner, run.name, run.runtime_s)

    def _learn(self, tenant: str, owner: str | None, name: str, runtime_s: float) -> None:
        self.estimator.observe(tenant, owner, name, runtime_s)
        self.learned += owner is not None
        self._memo.clear()

    def estimate(self, job: JobRecord) -> Estimate | None:
        key = (job.tenant, job.owner, job.name)
        if key not in self._memo:
            self._memo[key] = self.estimator.estimate(*key)
        return self._memo[key]

    def expected_s(self, job: JobRecord, max_runtime_s: int | None) -> float | None:
        """How long `job` should run in all: the learned estimate, or `maxRuntime` when it is
        shorter or nothing was learned (None when neither is known)."""
        learned = self.estimate(job)
        if learned is None:
            return None if max_runtime_s is None else float(max_runtime_s)
        if max_runtime_s is None:
            return learned.seconds
        return min(learned.seconds, float(max_runtime_s))
