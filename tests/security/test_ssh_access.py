"""`gpuyard ssh` goes through the platform with the rule of exec: the job's host key
(`GET /api/v1/jobs/{id}/ssh`) and the port stream to its sshd (`port: "ssh"`) are for the
job's owner, its tenant's admins and platform admins only. A viewer or another member is
refused (403), another tenant's member does not see the job (404, word for word a missing
job's), and none of them leaves an event. The `"ssh"` port names the task's own sshd port,
resolved by the server, and nothing else (a job without sshd: 409). The real client, sshd
and strict host key check: tests/e2e/test_ssh_cli_e2e.py."""

from __future__ import annotations

import pytest

from gpuyard.controller.sshkeys import host_public_key
from security.test_exec_access import bearer, session_end

JOBS = "/api/v1/jobs"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBzaPRnBWml7tGWYMMxUcwIvw6LbXQzPR7YjIHzzJXgd me@laptop"
SPEC = f"""name: sshd
tenant: red
ssh: {{jobKeys: false, authorizedKeys: ["{KEY}"]}}
taskRoles:
  main:
    command: sleep 100
"""
PLAIN = "name: plain\ntenant: red\ntaskRoles:\n  main:\n    command: sleep 100\n"


def start(world, spec: str) -> str:
    r = world.submit("alice", spec)
    assert r.status_code == 201, r.text
    job_id = r.json()["id"]
    world.ctl.run_cycle()
    world.engine.run(world.engine.keys_on(job_id)[-1])
    world.ctl.run_cycle()
    assert world.call("root", "GET", f"{JOBS}/{job_id}").json()["state"] == "RUNNING"
    return job_id


@pytest.fixture(scope="module")
def running(shared_world) -> str:
    return start(shared_world, SPEC)


def ssh_events(world, job_id: str) -> list[str]:
    events = world.call("root", "GET", f"{JOBS}/{job_id}/events").json()["events"]
    return [e["message"] for e in events if e["reason"] == "PortForward"]


@pytest.mark.parametrize(("who", "status"), [("vic", 403), ("amy", 403), ("bob", 404)])
def test_who_may_not_exec_gets_neither_the_host_key_nor_the_sshd(
    shared_world, running, who, status
):
    r = shared_world.call(who, "GET", f"{JOBS}/{running}/ssh")
    assert r.status_code == status, r.text
    assert "hostKey" not in r.text
    request = {"port": "ssh", "session": "s1"}
    end = session_end(shared_world, bearer(shared_world, who), f"{JOBS}/{running}/portforward",
                      request)  # fmt: skip
    assert end["status"] == status, end
    if who == "bob":  # as if the job did not exist
        assert r.json()["detail"] == end["error"] == f"no job {running}"
    assert ssh_events(shared_world, running) == []


def test_the_owner_gets_the_jobs_own_host_key_and_login(shared_world, running):
    r = shared_world.call("alice", "GET", f"{JOBS}/{running}/ssh")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["hostKey"] == host_public_key(shared_world.ctl.store.secrets, running, 1)
    assert body["task"] == "main/0" and body["user"] in ("task", "root")
    ports = shared_world.ctl.store.nodes.task_ports(
        shared_world.ctl.store.jobs.tasks(running)[0].id
    )
    assert body["port"] == ports["ssh"][0]


def test_a_job_without_sshd_has_no_ssh_port_to_name(shared_world):
    plain = start(shared_world, PLAIN)
    r = shared_world.call("alice", "GET", f"{JOBS}/{plain}/ssh")
    assert r.status_code == 409 and "runs no sshd" in r.json()["detail"], r.text
    end = session_end(shared_world, bearer(shared_world, "alice"), f"{JOBS}/{plain}/portforward",
                      {"port": "ssh"})  # fmt: skip
    assert end["status"] == 409 and "runs no sshd" in end["error"], end


def test_only_the_name_ssh_is_taken_for_a_port(shared_world, running):
    end = session_end(shared_world, bearer(shared_world, "alice"),
                      f"{JOBS}/{running}/portforward", {"port": "http"})  # fmt: skip
    assert end["status"] == 422 and end["errors"][0]["path"].startswith("body.port"), end
