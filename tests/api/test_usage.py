"""`GET /api/v1/usage` and `/daily` on the real app, store and controller: GPU-hours (from
the roll-up the controller fills), jobs, waits, quota; who sees which tenants; bad query
fields answer 422 at their path; the report outlives the task rows it was rolled up from."""

from __future__ import annotations

from datetime import datetime

import pytest
from sqlalchemy import delete

from api.conftest import spec
from gpuyard.runtime.types import TaskPhase
from gpuyard.store.db import session_factory
from gpuyard.store.tables import TaskRow

HOUR = 3600.0


def _advance(world, seconds: float) -> None:
    world.clock.advance(seconds)
    world.engine.now = world.clock.now()


def _run_all(world) -> None:
    for key, status in world.engine.status_of.items():
        if status.phase is TaskPhase.STARTING:
            world.engine.run(key)


@pytest.fixture
def used(world):
    """red-job (alice, 1 GPU) and blue-job (bob, 1 GPU) run an hour from t0; amy's 3-GPU
    job waits that hour for room, then runs an hour."""
    world.engine.now = world.clock.now()
    _run_all(world)
    world.ctl.run_cycle()
    world.big = world.submit("amy", spec("red", "big").replace("gpuNumber: 1", "gpuNumber: 3"))
    world.big = world.big.json()["id"]
    world.ctl.run_cycle()
    _advance(world, HOUR)
    for tenant in ("red", "blue"):
        [key] = world.engine.keys_on(world.jobs[tenant])
        world.engine.exit(key, 0, "Completed")
    world.ctl.run_cycle()
    world.ctl.run_cycle()
    _run_all(world)
    world.ctl.run_cycle()
    _advance(world, HOUR)
    world.ctl.run_cycle()
    return world


def _usage(world, who: str, query: str = "") -> dict:
    r = world.call(who, "GET", f"/api/v1/usage{query}")
    assert r.status_code == 200, r.text
    return r.json()


def test_gpu_hours_jobs_and_waits_per_tenant(used):
    body = _usage(used, "root")
    rows = {r["tenant"]: r for r in body["rows"]}
    assert set(rows) == {"red", "blue"}
    red, blue = rows["red"], rows["blue"]
    assert red["gpuHours"] == pytest.approx(1 + 3)
    assert blue["gpuHours"] == pytest.approx(1)
    assert (red["jobs"], red["started"]) == (2, 2)
    assert red["avgWaitS"] == pytest.approx(HOUR / 2)
    assert red["p95WaitS"] == pytest.approx(HOUR)
    assert red["lostGpuHours"] == 0
    assert body["total"]["gpuHours"] == pytest.approx(5)
    assert "most that was lost" in body["lostToPreemption"]


def test_totals_equal_the_tasks_gpu_seconds_in_the_store(used):
    jobs = [used.jobs["red"], used.jobs["blue"], used.big]
    expected = sum(used.store.usage.attained_by_job(jobs, used.clock.now()).values())
    assert _usage(used, "root")["total"]["gpuHours"] == pytest.approx(expected / HOUR)


def test_a_tenant_row_holds_its_quota_over_the_window(used):
    body = _usage(used, "root", "?since=3h")
    hours = (_t(body["until"]) - _t(body["since"])) / HOUR
    red = next(r for r in body["rows"] if r["tenant"] == "red")
    assert red["quotaGpuHours"] == pytest.approx(2 * hours)  # red is guaranteed 2 GPUs
    assert red["quotaUsedPct"] == pytest.approx(100 * 4 / (2 * hours))
    assert red["budgetGpuHours"] is None


def test_by_user_and_by_job(used):
    by_user = {
        (r["tenant"], r["user"]): r["gpuHours"] for r in _usage(used, "root", "?by=user")["rows"]
    }
    assert by_user == pytest.approx({("red", "alice"): 1, ("red", "amy"): 3, ("blue", "bob"): 1})
    by_job = {r["job"]: r for r in _usage(used, "root", "?by=job")["rows"]}
    assert by_job[used.big]["name"] == "big"
    assert by_job[used.big]["user"] == "amy"
    assert by_job[used.big]["avgWaitS"] == pytest.approx(HOUR)
    assert by_job[used.big]["quotaGpuHours"] is None


@pytest.mark.parametrize(
    ("who", "tenants"),
    [("alice", {"red"}), ("vic", {"red"}), ("redboss", {"red"}), ("bob", {"blue"})],
)
def test_each_caller_sees_the_usage_of_their_tenants_only(used, who, tenants):
    assert {r["tenant"] for r in _usage(used, who)["rows"]} == tenants
    assert {r["tenant"] for r in _usage(used, who, "?by=job")["rows"]} == tenants
    other = "blue" if "red" in tenants else "red"
    assert _usage(used, who, f"?tenant={other}")["rows"] == []
    daily = used.call(who, "GET", "/api/v1/usage/daily").json()
    assert {s["tenant"] for s in daily["gpuHours"]} == tenants


def test_daily_gpu_hours_and_waits(used):
    daily = used.call("root", "GET", "/api/v1/usage/daily").json()
    red = next(s for s in daily["gpuHours"] if s["tenant"] == "red")
    assert sum(p["value"] for p in red["points"]) == pytest.approx(4)
    waits = next(s for s in daily["avgWaitS"] if s["tenant"] == "red")
    assert [p["value"] for p in waits["points"]] == pytest.approx([HOUR / 2])


def test_a_window_after_the_use_is_empty(used):
    body = _usage(used, "root", "?since=1970-02-01&until=1970-03-01")
    assert body["rows"] == [] and body["total"]["gpuHours"] == 0


@pytest.mark.parametrize(
    ("query", "path"),
    [
        ("?by=team", "query.by"),
        ("?since=yesterday", "query.since"),
        ("?until=soon", "query.until"),
        ("?since=1h&until=2h", "query.until"),
    ],
)
def test_bad_query_fields_answer_422_at_their_path(used, query, path):
    r = used.call("root", "GET", f"/api/v1/usage{query}")
    assert r.status_code == 422, r.text
    assert [e["path"] for e in r.json()["errors"]] == [path]


def test_anonymous_gets_401(used):
    assert used.call("anonymous", "GET", "/api/v1/usage").status_code == 401


def test_usage_outlives_compacted_task_rows(used):
    before = _usage(used, "root", "?by=job")
    with session_factory(used.store.engine).begin() as s:
        gone = s.execute(delete(TaskRow).where(TaskRow.usage_done.is_(True))).rowcount
    assert gone == 2  # red-job's and blue-job's ended tasks
    used.ctl.run_cycle()
    assert _usage(used, "root", "?by=job")["rows"] == before["rows"]


def _t(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@pytest.mark.parametrize("field", ["since", "until"])
def test_a_window_beyond_the_calendar_answers_422(used, field):
    r = used.call("root", "GET", f"/api/v1/usage?{field}=9999-12-31T23:59")
    assert r.status_code == 422, r.text
    assert [e["path"] for e in r.json()["errors"]] == [f"query.{field}"]


@pytest.mark.parametrize("since", ["999999999999", "0001-01-01"])
def test_a_window_from_before_1970_starts_in_1970(used, since):
    body = _usage(used, "root", f"?since={since}")
    assert body["since"] == "1970-01-01T00:00:00.000Z"
    assert body["total"]["gpuHours"] == pytest.approx(5)


def test_the_queue_length_per_day(world):
    """A 3-GPU job of red waits (2 of the 4 GPUs are held) while the controller cycles every
    minute for ten minutes: red's queue held one job for 600 s."""
    world.submit("amy", spec("red", "waits").replace("gpuNumber: 1", "gpuNumber: 3"))
    world.ctl.run_cycle()
    for _ in range(10):
        _advance(world, 60)
        world.ctl.run_cycle()
    queued = world.store.accounting.queued(0.0, world.clock.now() + HOUR)
    assert {t for _, t, _ in queued} == {"red"}
    assert sum(s for _, _, s in queued) == pytest.approx(600)
    daily = world.call("alice", "GET", "/api/v1/usage/daily").json()
    [red] = daily["avgQueueLength"]
    day_start = _t(red["points"][0]["day"] + "T00:00:00Z")
    covered = min(day_start + 86400, _t(daily["until"])) - max(day_start, _t(daily["since"]))
    assert red["tenant"] == "red"
    assert red["points"][0]["value"] == pytest.approx(600 / covered)
    assert world.call("bob", "GET", "/api/v1/usage/daily").json()["avgQueueLength"] == []
