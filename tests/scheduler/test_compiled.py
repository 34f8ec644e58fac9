"""`make test` runs the scheduler and simulator tests twice: on the package as it is, and
on the copy whose scheduler mypyc compiled (`make test-compiled`, GPUYARD_COMPILED=1). This
checks that each pass runs the code it says it runs, and that the model's values still pickle
once compiled (Ray and process pools pickle them)."""

from __future__ import annotations

import copy
import os
import pickle

from builders import make_job, make_node, make_running
from gpuyard.model import FlavorQuota, Tenant
from gpuyard.scheduler import compiled


def test_the_scheduler_runs_compiled_exactly_in_the_compiled_pass():
    assert compiled() is (os.environ.get("GPUYARD_COMPILED") == "1")


def test_model_values_pickle_and_copy_compiled_or_not():
    job = make_job("j1", gpus=2, tasks=2)
    node = make_node("n1", gpus=2)
    running = make_running("r1", "t", "n1", 0, 1, borrowed=1)
    for value in (job, node, running, Tenant("t", quotas=(FlavorQuota("A100-80GB", 4),))):
        again = pickle.loads(pickle.dumps(value))
        assert again == value and copy.deepcopy(value) == value
    assert pickle.loads(pickle.dumps(job)).total == job.total  # worked out again
