"""The `gpuyard` CLI against the real server: submit --wait, jobs, show, logs, cancel, nodes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.container]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def cli(server, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GPUYARD_URL": server.url, "GPUYARD_TOKEN": server.token}
    return subprocess.run(
        [sys.executable, "-m", "gpuyard", *args],
        env=env,
        text=True,
        capture_output=True,
        timeout=timeout,
        check=False,
    )


def test_submit_wait_streams_logs_and_exits_by_outcome(server, tmp_path):
    ok = cli(server, "submit", str(EXAMPLES / "hello.yaml"), "--wait")
    assert ok.returncode == 0, ok.stderr
    assert "hello from gpuyard" in ok.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\ntaskRoles:\n  main:\n    command: echo oops; exit 4\n")
    failed = cli(server, "submit", str(bad), "--wait")
    assert failed.returncode == 1
    assert "oops" in failed.stdout and "Error(exit 4)" in failed.stderr


def test_listings_show_jobs_logs_and_fake_gpus(server):
    job_id = cli(server, "submit", str(EXAMPLES / "hello.yaml")).stdout.strip()
    server.wait(job_id)
    jobs = json.loads(cli(server, "jobs", "-o", "json").stdout)["jobs"]
    assert [j["id"] for j in jobs] == [job_id]
    assert "SUCCEEDED" in cli(server, "jobs").stdout
    assert "hello from gpuyard" in cli(server, "logs", job_id).stdout
    shown = cli(server, "show", job_id)
    assert shown.returncode == 0 and "Completed" in shown.stdout
    nodes = json.loads(cli(server, "nodes", "-o", "json").stdout)["nodes"]
    assert len(nodes) == 1 and len(nodes[0]["gpus"]) == 4
    assert all(g["fake"] for g in nodes[0]["gpus"])
    assert "FAKE" in cli(server, "nodes").stdout


def test_bad_spec_and_unknown_job_are_clear_errors(server, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ntaskRoles:\n  w:\n    gpuNumber: -1\n")
    r = cli(server, "submit", str(bad))
    assert r.returncode == 2
    assert "taskRoles.w.gpuNumber" in r.stderr and "Traceback" not in r.stderr
    r = cli(server, "show", "nope")
    assert r.returncode == 1 and "no job nope" in r.stderr


def test_cancel_from_the_cli(server):
    job_id = server.submit("name: long\ntaskRoles:\n  main:\n    command: sleep 300\n")
    server.wait(job_id, {"RUNNING"})
    assert cli(server, "cancel", job_id).returncode == 0
    assert server.wait(job_id, timeout=30)["state"] == "STOPPED"


def test_admin_makes_a_tenant_and_user_who_logs_in(server, tmp_path):
    r = cli(
        server,
        "admin",
        "tenant",
        "create",
        "vision",
        "--gpus",
        "A100-80GB:2",
        "--borrowing-limit",
        "1",
        "--policy",
        "las",
        "--storage-root",
        str(tmp_path / "vision"),
    )
    assert r.returncode == 0, r.stderr
    assert "A100-80GB:2 (borrow ≤1)" in r.stdout
    r = cli(
        server,
        "admin",
        "tenant",
        "update",
        "vision",
        "--lending-limit",
        "A100-80GB:1",
        "-o",
        "json",
    )
    quota = json.loads(r.stdout)["quotas"][0]
    assert (quota["borrowingLimit"], quota["lendingLimit"]) == (1, 1)
    assert cli(server, "admin", "user", "create", "alice", "--tenant", "vision").returncode == 0
    made = cli(server, "admin", "token", "create", "alice", "--name", "laptop")
    assert made.returncode == 0 and "shown only this once" in made.stderr
    token_file = tmp_path / "alice-token"
    token_file.write_text(made.stdout.strip() + "\n")

    config = tmp_path / "config"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUYARD_")}
    env["XDG_CONFIG_HOME"] = str(config)

    def as_alice(*args):
        return subprocess.run(
            [sys.executable, "-m", "gpuyard", *args],
            env=env,
            text=True,
            capture_output=True,
            timeout=60,
            check=False,
        )

    r = as_alice("login", "--url", server.url, "--token-file", str(token_file))
    assert r.returncode == 0 and "as alice" in r.stdout, r.stderr
    assert (config / "gpuyard" / "config.json").stat().st_mode & 0o777 == 0o600
    who = as_alice("whoami")
    assert "alice (user)" in who.stdout and "vision (member)" in who.stdout
    assert as_alice("admin", "tenant", "create", "x").returncode == 1  # not a platform admin
    assert "only a platform admin" in as_alice("admin", "user", "create", "eve").stderr


def test_a_bad_token_is_refused_with_how_to_log_in(server):
    env = {**os.environ, "GPUYARD_URL": server.url, "GPUYARD_TOKEN": "gy_nope"}
    r = subprocess.run(
        [sys.executable, "-m", "gpuyard", "jobs"],
        env=env,
        text=True,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 1 and "gpuyard login" in r.stderr and "HTTP 401" in r.stderr


def test_tenant_settings_from_the_command_line_reach_the_server(server, tmp_path):
    root = str(tmp_path / "vision")
    made = cli(server, "admin", "tenant", "create", "vision", "--gpus", "A100-80GB:2",
               "--weight", "2", "--cpu", "4", "--memory-mb", "8192", "--storage-root", root,
               "--allow-root", "--policy", "las")
    assert made.returncode == 0, made.stderr
    changed = cli(server, "admin", "tenant", "update", "vision", "--weight", "3",
                  "--max-gpus-per-user", "1", "--gpu-hour-budget", "10",
                  "--allow-internet", "--allow-host-network")
    assert changed.returncode == 0, changed.stderr
    t = server.http.get("/api/v1/tenants/vision").json()
    assert (t["weight"], t["queuePolicy"], t["cpuMilli"], t["memoryMB"]) == (3.0, "las", 4000, 8192)
    assert t["storageRoots"] == [root] and t["allowRoot"] is True
    assert (t["maxGpusPerUser"], t["gpuHourBudget"]) == (1, 10.0)
    assert (t["allowInternet"], t["allowHostNetwork"]) == (True, True)
