"""Failover (docs/ha.md): two real `gpuyard up` on one PostgreSQL database (and one data dir:
the local engine's tasks are on this machine), the leader killed -9 while a real container
job runs; the follower takes over, adopts the task, and the job ends once. A submission taken
by the follower is run by the leader."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import create_engine, text

from gpuyard.cli.admin_leader import leader_lines

pytestmark = [pytest.mark.e2e, pytest.mark.container]


def leadership(server) -> dict:
    r = server.http.get("/api/v1/leader")
    assert r.status_code == 200, r.text
    return r.json()


def until_leader(server, timeout: float = 30.0) -> tuple[dict, float]:
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        state = leadership(server)
        if state["role"] == "leader":
            return state, time.monotonic() - began
        time.sleep(0.1)
    raise AssertionError(f"not the leader after {timeout} s: {leadership(server)}")


def task_rows(url: str, job_id: str) -> list[tuple]:
    """The job's task rows and its events, counted in the database itself."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return list(
                conn.execute(
                    text(
                        "SELECT attempt, state, started_at, finished_at FROM tasks WHERE job_id = :j"
                    ),
                    {"j": job_id},
                )
            )
    finally:
        engine.dispose()


@pytest.mark.pg
def test_the_leader_killed_mid_run_the_follower_adopts_and_the_job_ends_once(
    make_server, tmp_path, pg_database
):
    out = tmp_path / "storage" / "out"
    first = make_server("--db-url", pg_database)
    second = make_server("--db-url", pg_database)
    assert leadership(first)["role"] == "leader"
    state = leadership(second)
    assert state["role"] == "follower" and state["leader"]["term"] == 1

    # submitted on the follower: the leader's cycle is woken (NOTIFY) and runs it
    jid = second.submit(
        f"name: survivor\noutputDir: {out}\ntaskRoles:\n  main:\n"
        "    command: sleep 5; echo done > /output/done.txt\n"
    )
    second.wait(jid, {"RUNNING"})
    first.kill9()
    state, took = until_leader(second)
    print(
        f"the follower led {took:.2f} s after the leader's kill -9 (term {state['leader']['term']})"
    )
    assert state["leader"]["term"] == 2 and state["leader"]["id"] == state["server"]
    assert leader_lines(state)[1].endswith(": leader")  # gpuyard admin leader's lines
    scraped = second.http.get("/metrics").text.splitlines()
    assert "gpuyard_leader 1.0" in scraped and "gpuyard_leader_term 2.0" in scraped

    job = second.wait(jid, timeout=60)
    assert job["state"] == "SUCCEEDED", job
    assert (out / "done.txt").read_text().strip() == "done"
    rows = task_rows(pg_database, jid)
    assert len(rows) == 1 and rows[0][0] == 1 and rows[0][1] == "SUCCEEDED"  # one start
    events = job["events"]
    assert sum(e["toState"] == "SUCCEEDED" for e in events) == 2  # the task's end, the job's
    assert sum(e["toState"] == "RUNNING" for e in events) == 2  # the task's start, the job's
