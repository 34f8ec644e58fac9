"""`gpuyard usage` against the real app served by uvicorn (tests/cli/test_cli_control.py's
server over tests/api's world): a table with totals, CSV and JSON, groups by user and job,
a member sees their tenant only, a bad --since is the server's 422 sentence and exit 2."""

from __future__ import annotations

import csv
import io
import json

import pytest

from cli.test_cli_control import Served, served  # noqa: F401 (the fixture, used by name)
from gpuyard.runtime.types import TaskPhase

HOUR = 3600.0


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Served:
    return request.getfixturevalue("served")


def _ran_an_hour(s: Served) -> None:
    """red-job (alice) and blue-job (bob) run one GPU each for an hour; the controller rolls
    their use up."""
    w = s.world
    w.engine.now = w.clock.now()
    for key, status in list(w.engine.status_of.items()):
        if status.phase is TaskPhase.STARTING:
            w.engine.run(key)
    w.ctl.run_cycle()
    w.clock.advance(HOUR)
    w.ctl.run_cycle()


def test_usage_table_per_tenant_with_totals(server):
    _ran_an_hour(server)
    r = server.full("root", "usage")
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0].split()[:4] == ["TENANT", "GPU-H", "CPU-H", "JOBS"]
    rows = {line.split()[0]: line.split() for line in lines[1:3]}
    assert rows["red"][1] == "1.0" and rows["blue"][1] == "1.0"
    assert "total" in r.stdout and "2.0" in r.stdout
    assert "whole UTC hours" in r.stdout


def test_usage_csv_by_user_and_json_by_job(server):
    _ran_an_hour(server)
    r = server.full("root", "usage", "--by", "user", "-o", "csv")
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert {(x["tenant"], x["user"]): float(x["gpuHours"]) for x in rows} == {
        ("red", "alice"): 1.0,
        ("blue", "bob"): 1.0,
    }
    r = server.full("alice", "usage", "--by", "job", "-o", "json")
    data = json.loads(r.stdout)
    assert [row["job"] for row in data["rows"]] == [server.world.jobs["red"]]


def test_usage_a_bad_since_says_the_field(server):
    r = server.full("alice", "usage", "--since", "yesterday")
    assert r.exit_code == 2
    assert "--since: must be a duration like 30m" in r.stderr
