"""A failed task's message ends with the last lines of its log (runtime/exits.py: `with_log`),
and so do its job's message and the events that carry it. Logs are for whoever may read them:
a viewer of the tenant, or a member who does not own the job, must not read those lines
through any other door either: the job, the job list, the events, the queue, the portal's
pages, OpenPAI's REST API. A member of another tenant does not see the job at all (404).
The attack: a task that prints a credential and fails, read by everyone else."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuyard.api.schemas.jobs import LOG_HIDDEN
from gpuyard.runtime.exits import with_log
from gpuyard.runtime.types import TaskExit, TaskPhase, TaskStatus

LEAKED = "hf_printed-by-mistake-9f3c"
OOM = "out of memory: the task used more than its 512 MB limit"
JOBS = "/api/v1/jobs"
PAI = "/rest-server/api/v2/jobs"


def spec(name: str, retries: int) -> str:
    return (
        f"name: {name}\ntenant: red\nretryCount: {retries}\n"
        "taskRoles:\n  main:\n    gpuNumber: 0\n    command: 'python train.py'\n"
    )


def fail_task(world, job_id: str, message: str) -> None:
    """The job's task (its latest attempt) starts and fails with `message`."""
    world.ctl.run_cycle()
    key = world.engine.keys_on(job_id)[-1]
    world.engine.run(key)
    world.engine.status_of[key] = TaskStatus(
        key, TaskPhase.EXITED, 0.0, TaskExit(1, "Error(exit 1)", 1.0, message)
    )
    world.ctl.run_cycle()


@pytest.fixture(scope="module")
def leaky(shared_world, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """alice's jobs whose task printed a credential and failed: `failed` (no retries; its log
    lines alone are the message, as the runtime writes a plain exit), `retrying` (its first
    attempt ended with notes, then the log lines; the retry's event says so)."""
    log = tmp_path_factory.mktemp("log") / "log"
    log.write_text(f"loading model\nHF_TOKEN={LEAKED}\nTraceback: boom\n")
    out = {}
    for name, retries, notes in (("failed", 0, ""), ("retrying", 1, OOM)):
        r = shared_world.submit("alice", spec(name, retries))
        assert r.status_code == 201, r.text
        out[name] = r.json()["id"]
        fail_task(shared_world, out[name], with_log(notes, Path(log)))
    states = {n: shared_world.call("root", "GET", f"{JOBS}/{i}").json() for n, i in out.items()}
    assert states["failed"]["state"] == "FAILED" and states["retrying"]["attempt"] == 2
    return out


def api_pages(jobs: dict[str, str]) -> list[str]:
    per_job = [f"{JOBS}/{i}" for i in jobs.values()] + [f"{JOBS}/{i}/events" for i in jobs.values()]
    return [*per_job, f"{JOBS}?limit=1000", "/api/v1/queue", f"{PAI}", *pai_pages(jobs)]


def pai_pages(jobs: dict[str, str]) -> list[str]:
    return [f"{PAI}/alice~{name}" for name in jobs]


def portal_pages(jobs: dict[str, str]) -> list[str]:
    per_job = [f"/jobs/{i}" for i in jobs.values()] + [f"/jobs/{i}/live" for i in jobs.values()]
    return ["/jobs", "/jobs/table", *per_job]


def read_all(world, who: str, jobs: dict[str, str]) -> dict[str, tuple[int, str]]:
    """Every page that shows the jobs, as `who` reads it: path → (status, text)."""
    cookie = {"Cookie": f"gpuyard_session={world.tokens[who]}"}
    out = {}
    for path in api_pages(jobs):
        r = world.call(who, "GET", path)
        out[path] = (r.status_code, r.text)
    for path in portal_pages(jobs):
        r = world.client.get(path, headers=cookie)
        out[path] = (r.status_code, r.text)
    return out


@pytest.mark.parametrize("who", ["vic", "amy", "bob"])  # red's viewer, red's other member, blue
def test_who_may_not_read_the_logs_reads_no_log_line_anywhere(shared_world, leaky, who):
    for path, (status, text) in read_all(shared_world, who, leaky).items():
        assert status in (200, 404), (path, status, text)
        assert LEAKED not in text and "Traceback" not in text, (who, path)


@pytest.mark.parametrize("who", ["vic", "amy"])
def test_they_see_the_message_without_its_log_lines_and_why(shared_world, leaky, who):
    job = shared_world.call(who, "GET", f"{JOBS}/{leaky['failed']}").json()
    assert job["message"] == f"task main/0 ended Error(exit 1): {LOG_HIDDEN}"
    assert job["tasks"][0]["message"] == LOG_HIDDEN
    assert job["reason"] == "Error(exit 1)"  # the reason is everyone's
    retrying = shared_world.call(who, "GET", f"{JOBS}/{leaky['retrying']}").json()
    (first,) = [t for t in retrying["tasks"] if t["attempt"] == 1]
    assert first["message"] == f"{OOM}\n{LOG_HIDDEN}"
    retry = [e for e in retrying["events"] if (e["message"] or "").startswith("retry 1/1")]
    assert retry and retry[0]["message"].endswith(f"{OOM}\n{LOG_HIDDEN}")
    events = shared_world.call(who, "GET", f"{JOBS}/{leaky['failed']}/events").json()["events"]
    assert any(LOG_HIDDEN in (e["message"] or "") for e in events)


def test_a_member_of_another_tenant_does_not_see_the_jobs(shared_world, leaky):
    for job_id in leaky.values():
        assert shared_world.call("bob", "GET", f"{JOBS}/{job_id}").status_code == 404
        assert shared_world.call("bob", "GET", f"{JOBS}/{job_id}/events").status_code == 404
    listed = shared_world.call("bob", "GET", f"{JOBS}?limit=1000").json()["jobs"]
    assert not {j["id"] for j in listed} & set(leaky.values())


@pytest.mark.parametrize("who", ["alice", "redboss", "root"])  # owner, tenant admin, platform
def test_who_may_read_the_logs_reads_the_log_lines(shared_world, leaky, who):
    for path in (f"{JOBS}/{leaky['failed']}", f"{JOBS}/{leaky['failed']}/events"):
        r = shared_world.call(who, "GET", path)
        assert LEAKED in r.text and LOG_HIDDEN not in r.text, path
    listed = shared_world.call(who, "GET", f"{JOBS}?limit=1000").json()["jobs"]
    (failed,) = [j for j in listed if j["id"] == leaky["failed"]]
    assert LEAKED in failed["message"]
    cookie = {"Cookie": f"gpuyard_session={shared_world.tokens[who]}"}
    assert LEAKED in shared_world.client.get(f"/jobs/{leaky['failed']}", headers=cookie).text
