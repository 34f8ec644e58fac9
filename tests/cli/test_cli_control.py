"""`gpuyard jobs` filters and pages, `cancel` by filter, `resubmit --set`, `hold`, `release`
and `priority`, both paths of the command line against the real app served by uvicorn on a
free port (tests/api/conftest.py's world: the real controller on the fake engine, whose
cycles the tests run)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import uvicorn
from typer.testing import CliRunner

from api.conftest import World, build_world, spec
from e2e.conftest import free_port
from gpuyard.cli import control, fastjobs
from gpuyard.cli.main import app
from gpuyard.store import Membership, TenantRole


@dataclass
class Served:
    world: World
    url: str

    def fast_jobs(self, who: str, *args: str, monkeypatch, capsys) -> tuple[int, str, str]:
        monkeypatch.setenv("GPUYARD_TOKEN", self.world.tokens[who])
        code = fastjobs.main(["--url", self.url, "jobs", *args])
        out = capsys.readouterr()
        return code, out.out, out.err

    def full(self, who: str, *args: str, stdin: str | None = None):
        env = {"GPUYARD_TOKEN": self.world.tokens[who], "NO_COLOR": "1", "COLUMNS": "200"}
        return CliRunner().invoke(app, ["--url", self.url, *args], env=env, input=stdin)

    def submit(self, who: str, tenant: str, name: str, gpus: int = 1) -> str:
        text = spec(tenant, name).replace("gpuNumber: 1", f"gpuNumber: {gpus}")
        r = self.world.submit(who, text)
        assert r.status_code == 201, r.text
        return r.json()["id"]

    def state(self, job_id: str) -> str:
        return str(self.world.store.jobs.get(job_id).state)


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no saved login
    worlds = build_world(tmp_path)
    world = next(worlds)
    port = free_port()
    config = uvicorn.Config(world.client.app, port=port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started
    yield Served(world, f"http://127.0.0.1:{port}")
    server.should_exit = True
    thread.join(10)
    next(worlds, None)


# -- jobs ------------------------------------------------------------------------------


def test_fast_jobs_filters_and_pages(served, monkeypatch, capsys):
    mine = [served.submit("alice", "red", f"train-{i}") for i in range(3)]
    served.submit("amy", "red", "train-amy")
    code, out, err = served.fast_jobs(
        "alice", "--user", "alice", "--name", "TRAIN-*", "--limit", "2",
        monkeypatch=monkeypatch, capsys=capsys,
    )  # fmt: skip
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()[1:3]] == [mine[2], mine[1]]
    assert "train-amy" not in out and "red-job" not in out
    cursor = err.split("--cursor ")[1].split()[0]
    code, out, err = served.fast_jobs(
        "alice", "--user", "alice", "--name", "train-*", "--limit", "2", "--cursor", cursor,
        monkeypatch=monkeypatch, capsys=capsys,
    )  # fmt: skip
    assert out.splitlines()[1].split()[0] == mine[0] and len(out.splitlines()) == 2
    assert "--cursor" not in err  # the last page


def test_full_jobs_takes_the_same_filters(served):
    served.submit("amy", "red", "eval")
    r = served.full("alice", "jobs", "--user", "amy", "--since", "1h", "-o", "json")
    assert r.exit_code == 0, r.output
    assert '"name": "eval"' in r.stdout and "red-job" not in r.stdout
    r = served.full("alice", "jobs", "--since", "tomorrow")
    assert r.exit_code == 1 and "query.since" not in r.stdout


# -- cancel ----------------------------------------------------------------------------


@pytest.fixture
def sweep(served):
    served.world.store.users.set_membership("alice", Membership("blue", TenantRole.VIEWER))
    served.sweep = {
        who: served.submit(who, tenant, f"sweep-{who}")
        for who, tenant in (("alice", "red"), ("amy", "red"), ("bob", "blue"))
    }
    return served


def asked(served) -> dict[str, str | None]:
    return {w: served.world.store.jobs.get(j).stop_requested for w, j in served.sweep.items()}


def test_cancel_by_filter_cancels_what_it_may_and_says_what_was_refused(sweep):
    r = sweep.full("alice", "cancel", "--name", "sweep-*", "--yes")
    assert r.exit_code == 1, r.output  # some were refused
    assert "would cancel 1 of 3 matching jobs" in r.stdout and "cancelling 1 job\n" in r.stdout
    assert f"refused {sweep.sweep['amy']} (sweep-amy)" in r.stderr
    assert "viewer of tenant blue" in r.stderr
    assert asked(sweep) == {"alice": "Cancelled", "amy": None, "bob": None}


def test_cancel_by_filter_asks_first(sweep, monkeypatch):
    r = sweep.full("alice", "cancel", "--user", "alice", "--state", "queued")
    assert r.exit_code == 2 and "add --yes" in r.stderr  # not a terminal: nothing done
    monkeypatch.setattr(control, "interactive", lambda: True)
    r = sweep.full("alice", "cancel", "--user", "alice", "--state", "queued", stdin="n\n")
    assert r.exit_code == 1 and "would cancel 1 of 1 matching jobs" in r.stdout
    assert asked(sweep)["alice"] is None
    r = sweep.full("alice", "cancel", "--user", "alice", "--state", "queued", stdin="y\n")
    assert r.exit_code == 0, r.output
    assert asked(sweep)["alice"] == "Cancelled"


def test_cancel_of_one_job_is_as_before(sweep):
    r = sweep.full("alice", "cancel", sweep.sweep["alice"])
    assert r.exit_code == 0 and "cancelling job" in r.stdout
    r = sweep.full("alice", "cancel")
    assert r.exit_code == 2 and "name a job, or filters" in r.stderr


# -- resubmit, hold, release, priority ---------------------------------------------------


def test_resubmit_with_set(served):
    old = served.world.jobs["red"]
    r = served.full("amy", "resubmit", old, "--set", "taskRoles.main.gpuNumber=2",
                    "--set", "name=again")  # fmt: skip
    assert r.exit_code == 0, r.output
    new = served.world.store.jobs.get(r.stdout.strip())
    assert (new.name, new.owner, new.spec["taskRoles"]["main"]["gpuNumber"]) == ("again", "amy", 2)
    r = served.full("amy", "resubmit", old, "--set", "taskRoles.mian.gpuNumber=2")
    assert r.exit_code == 2
    assert "body.set.taskRoles.mian.gpuNumber" in r.stderr and "'mian'" in r.stderr
    r = served.full("amy", "resubmit", old, "--set", "gpuNumber")
    assert r.exit_code == 2 and "is not path=value" in r.output


def test_hold_keeps_a_job_from_starting_and_release_lets_it(served):
    job = served.submit("alice", "red", "held")
    r = served.full("alice", "hold", job)
    assert r.exit_code == 0 and f"gpuyard release {job}" in r.stdout
    served.world.ctl.run_cycle()
    assert served.state(job) == "QUEUED"
    r = served.full("alice", "jobs")
    assert "held by alice" in r.stdout
    r = served.full("alice", "release", job)
    assert r.exit_code == 0 and "released" in r.stdout
    served.world.ctl.run_cycle()
    assert served.state(job) == "SCHEDULED"
    r = served.full("alice", "hold", job)
    assert r.exit_code == 1 and "only a queued job can be held" in r.stderr


def test_priority_within_the_users_rights(served):
    job = served.submit("alice", "red", "p")
    r = served.full("alice", "priority", job, "-5")
    assert r.exit_code == 0, r.output
    assert served.world.store.jobs.get(job).priority == -5
    r = served.full("amy", "priority", job, "9")
    assert r.exit_code == 1 and "may not change the priority of job" in r.stderr
    r = served.full("redboss", "priority", job, "1000")
    assert r.exit_code == 0 and served.world.store.jobs.get(job).priority == 1000
    r = served.full("alice", "priority", job, "5000")
    assert r.exit_code == 2 and "body.priority" in r.stderr
