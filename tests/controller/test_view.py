"""The scheduler's view as the controller builds it: budget periods and usage from task rows."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from builders import make_node
from fake_engine import FakeEngine
from gpuyard.controller import Controller
from gpuyard.controller.view import period_bounds
from gpuyard.model import BudgetPeriod, FlavorQuota, JobState, ManualClock, Tenant
from gpuyard.spec import parse_job_spec
from gpuyard.store import NewJob, open_store


def ts(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("now", "period", "start", "end"),
    [
        ("2026-11-22 13:05:00", BudgetPeriod.DAY, "2026-11-22 00:00:00", "2026-11-23 00:00:00"),
        ("2026-11-22 13:05:00", BudgetPeriod.WEEK, "2026-11-16 00:00:00", "2026-11-23 00:00:00"),
        ("2026-11-22 13:05:00", BudgetPeriod.MONTH, "2026-11-01 00:00:00", "2026-12-01 00:00:00"),
        ("2026-12-31 23:59:59", BudgetPeriod.MONTH, "2026-12-01 00:00:00", "2027-01-01 00:00:00"),
    ],
)
def test_budget_periods(now, period, start, end):
    assert period_bounds(ts(now), period) == (ts(start), ts(end))


def test_a_tenant_over_its_gpu_hour_budget_waits_for_the_next_period(tmp_path: Path):
    clock = ManualClock(ts("2026-11-22 10:00:00"))
    store = open_store(tmp_path, clock=clock)
    engine = FakeEngine(make_node("n1", gpus=4))
    ctl = Controller(store, engine, clock)
    store.tenants.create(
        Tenant(
            "lab",
            quotas=(FlavorQuota("A100-80GB", 4),),
            gpu_hour_budget=2.0,
            budget_period=BudgetPeriod.DAY,
        )
    )

    def submit() -> str:
        doc = {
            "name": "t",
            "tenant": "lab",
            "taskRoles": {"w": {"gpuNumber": 2, "command": "true"}},
        }
        spec = parse_job_spec(doc)
        job = NewJob(spec.name, spec.tenant, spec.priority, spec.retry_count, spec.to_document())
        return store.jobs.submit(job).id

    first = submit()
    ctl.run_cycle()
    (key,) = engine.keys_on(first)
    engine.now = clock.now()
    engine.run(key)  # 2 GPUs for 1.5 h: 3 GPU-hours, over the budget of 2
    clock.advance(5400)
    engine.now = clock.now()
    engine.exit(key, 0, "Completed")
    ctl.run_cycle()
    assert store.jobs.get(first).state == JobState.SUCCEEDED

    second = submit()
    ctl.run_cycle()
    job = store.jobs.get(second)
    assert job.state == JobState.QUEUED and job.pending_code == "BudgetExhausted"
    clock.set(ts("2026-11-23 00:00:01"))  # a new day, a new budget
    ctl.run_cycle()
    assert store.jobs.get(second).state == JobState.SCHEDULED
