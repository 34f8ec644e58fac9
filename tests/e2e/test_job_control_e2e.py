"""Bulk cancel by filter and resubmit on the real server (`gpuyard up`, real containers),
through the real `gpuyard` command: a member's filter cancels their own running jobs and
names the admin's job it may not cancel, which goes on running."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from e2e.test_e2e_tenancy import make_user

pytestmark = [pytest.mark.e2e, pytest.mark.container]

SLEEPER = "name: {name}\ntaskRoles:\n  main:\n    cpuNumber: 0.2\n    command: sleep 300\n"


def cli(server, token: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GPUYARD_URL": server.url, "GPUYARD_TOKEN": token, "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "gpuyard", *args], env=env, text=True,
                          capture_output=True, timeout=60, check=False)  # fmt: skip


def test_cancel_by_filter_and_resubmit_on_the_real_server(server):
    alice_token = make_user(server, "alice", "default")
    alice = server.as_user(alice_token)
    admins = server.submit(SLEEPER.format(name="sweep-admin"))
    mine = []
    for i in range(2):
        r = alice.post("/api/v1/jobs", content=SLEEPER.format(name=f"sweep-{i}"),
                       headers={"Content-Type": "application/yaml"})  # fmt: skip
        assert r.status_code == 201, r.text
        mine.append(r.json()["id"])
    other = alice.post("/api/v1/jobs", content=SLEEPER.format(name="keep"),
                       headers={"Content-Type": "application/yaml"}).json()["id"]  # fmt: skip
    for job in (admins, *mine, other):
        server.wait(job, {"RUNNING"}, timeout=60)

    listed = cli(server, alice_token, "jobs", "--name", "sweep-*", "--user", "alice")
    assert listed.returncode == 0, listed.stderr
    assert all(j in listed.stdout for j in mine) and admins not in listed.stdout

    done = cli(server, alice_token, "cancel", "--name", "sweep-*", "--yes")
    assert done.returncode == 1, done.stdout + done.stderr  # the admin's job was refused
    assert "would cancel 2 of 3 matching jobs" in done.stdout
    assert f"refused {admins} (sweep-admin)" in done.stderr and "belongs to admin" in done.stderr
    for job in mine:
        assert server.wait(job, timeout=30)["state"] == "STOPPED"
    assert server.job(admins)["state"] == "RUNNING"
    assert server.job(other)["state"] == "RUNNING"

    again = cli(server, alice_token, "resubmit", mine[0], "--set", "name=sweep-again")
    assert again.returncode == 0, again.stderr
    new = server.wait(again.stdout.strip(), {"RUNNING"}, timeout=60)
    assert (new["name"], new["owner"]) == ("sweep-again", "alice")
