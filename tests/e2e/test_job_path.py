"""The whole path of a job on this machine: real server, real store, real OCI containers."""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.container]

PROBE = r"""
out=/output/$GPUYARD_TASK_ROLE-$GPUYARD_TASK_INDEX.json
if touch /data/x 2>/dev/null; then data_ro=false; else data_ro=true; fi
if touch /usr/x 2>/dev/null; then root_ro=false; else root_ro=true; fi
printf '{"nv":"%s","cuda":"%s","pid":%s,"nproc":%s,"data_ro":%s,"root_ro":%s,"data":"%s","pai":"%s"}' \
  "$NVIDIA_VISIBLE_DEVICES" "$CUDA_VISIBLE_DEVICES" "$$" "$(ls -d /proc/[0-9]* | wc -l)" \
  "$data_ro" "$root_ro" "$(cat /data/input.txt)" "$PAI_CURRENT_TASK_ROLE_NAME/$PAI_TASK_INDEX" > $out
echo "probe done for $GPUYARD_TASK_ROLE/$GPUYARD_TASK_INDEX"
"""


def two_role_spec(data: Path, out: Path) -> str:
    cmd = json.dumps(PROBE)
    return textwrap.dedent(f"""\
        name: two-roles
        dataDir: {data}
        outputDir: {out}
        taskRoles:
          ps:
            taskNumber: 1
            cpuNumber: 0.5
            memoryMB: 256
            command: {cmd}
          worker:
            taskNumber: 2
            cpuNumber: 0.5
            memoryMB: 256
            gpuNumber: 1
            command: {cmd}
        """)


def test_two_role_job_runs_isolated_in_real_containers(server):
    data, out = server.storage / "in", server.storage / "out"
    data.mkdir()
    (data / "input.txt").write_text("hello")
    job = server.wait(server.submit(two_role_spec(data, out)))
    assert job["state"] == "SUCCEEDED", job
    tasks = {f"{t['role']}/{t['index']}": t for t in job["tasks"]}
    assert set(tasks) == {"ps/0", "worker/0", "worker/1"}
    seen = {
        name: json.loads((out / f"{name.replace('/', '-')}.json").read_text()) for name in tasks
    }
    for name, probe in seen.items():
        placed = [g["uuid"] for g in tasks[name]["gpus"]]
        assert probe["nv"] == (",".join(placed) if placed else "void"), name
        assert probe["cuda"] == ",".join(str(i) for i in range(len(placed))), name
        assert probe["pid"] == 1, name  # its own pid namespace: the shell is init
        assert probe["nproc"] < 10, name  # and it sees only its own processes
        assert probe["data_ro"] and probe["root_ro"], name
        assert probe["data"] == "hello" and probe["pai"] == name, name
    worker_gpus = [tasks[f"worker/{i}"]["gpus"][0]["uuid"] for i in (0, 1)]
    assert len(set(worker_gpus)) == 2 and all(g["fake"] for t in tasks.values() for g in t["gpus"])
    assert "probe done for worker/1" in server.logs(job["id"], task="worker/1")


def test_exit_3_is_retried_then_fails(server):
    jid = server.submit(
        "name: fails\nretryCount: 2\ntaskRoles:\n  main:\n"
        "    command: echo attempt $GPUYARD_ATTEMPT; exit 3\n"
    )
    job = server.wait(jid)
    assert job["state"] == "FAILED" and job["reason"] == "Error(exit 3)"
    assert job["attempt"] == 3 and job["retriesUsed"] == 2
    assert [t["reason"] for t in job["tasks"]] == ["Error(exit 3)"] * 3
    assert "attempt 3" in server.logs(jid)
    assert "attempt 1" in server.logs(jid, attempt=1)


def test_memory_hog_is_oom_killed(server):
    jid = server.submit(
        "name: hog\ntaskRoles:\n  main:\n    memoryMB: 64\n"
        '    command: python3 -c "b = bytearray(512 * 1024 * 1024); print(len(b))"\n'
    )
    job = server.wait(jid)
    assert job["state"] == "FAILED" and job["reason"] == "OOMKilled", job


def test_fork_bomb_is_contained_by_the_pids_limit(make_server):
    server = make_server("--pids-limit", "64")
    bomb = "bomb() { bomb | bomb & }; bomb; sleep 3; echo still here"
    jid = server.submit(f"name: bomb\nmaxRuntime: 30\ntaskRoles:\n  main:\n    command: '{bomb}'\n")
    job = server.wait(jid, timeout=60)
    assert job["state"] in ("SUCCEEDED", "FAILED"), job
    # the host is fine: the server still answers and runs the next job
    ok = server.wait(server.submit("name: after\ntaskRoles:\n  main:\n    command: echo ok\n"))
    assert ok["state"] == "SUCCEEDED"


def test_cancel_stops_a_running_job(server):
    jid = server.submit("name: sleeper\ntaskRoles:\n  main:\n    command: sleep 300\n")
    server.wait(jid, {"RUNNING"})
    r = server.http.post(f"/api/v1/jobs/{jid}/cancel")
    assert r.status_code == 202
    job = server.wait(jid, timeout=30)
    assert job["state"] == "STOPPED" and job["reason"] == "Cancelled"
    assert server.http.post(f"/api/v1/jobs/{jid}/cancel").status_code == 409


def test_job_too_big_stays_queued_with_its_reason(server):
    jid = server.submit(
        "name: big\ntaskRoles:\n  main:\n    gpuNumber: 8\n    gpuType: A100\n    command: 'true'\n"
    )
    deadline = time.monotonic() + 10
    while not (job := server.job(jid))["pendingReason"] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert job["state"] == "QUEUED"
    assert job["pendingCode"] == "ExceedsNodeCapacity"
    assert "needs 8 GPUs of type A100 on one node; no node has more than 4" in job["pendingReason"]


def test_bad_spec_is_422_naming_each_field(server):
    r = server.http.post(
        "/api/v1/jobs",
        content="name: 'bad name!'\nretryCount: -1\ntaskRoles:\n  w:\n    gpuNumber: two\n",
        headers={"Content-Type": "application/yaml"},
    )
    assert r.status_code == 422
    paths = {e["path"] for e in r.json()["errors"]}
    assert {"name", "retryCount", "taskRoles.w.gpuNumber", "taskRoles.w.command"} <= paths
    assert server.http.get("/api/v1/jobs").json()["jobs"] == []


def test_server_killed_mid_run_loses_nothing(make_server, tmp_path):
    killed_mid_run_loses_nothing(make_server, tmp_path)


@pytest.mark.pg
def test_server_killed_mid_run_loses_nothing_on_postgresql(make_server, tmp_path, pg_database):
    """The same with the state in PostgreSQL (`--db-url`: a new database of the session's
    server, tests/pgserver.py, that the server migrates from nothing)."""
    killed_mid_run_loses_nothing(make_server, tmp_path, "--db-url", pg_database)


def killed_mid_run_loses_nothing(make_server, tmp_path, *extra: str) -> None:
    """A job runs, the server is killed -9, a new one adopts the task: its end once."""
    out = tmp_path / "storage" / "out"
    server = make_server(*extra)
    jid = server.submit(
        f"name: survivor\noutputDir: {out}\ntaskRoles:\n  main:\n"
        "    command: sleep 4; echo done > /output/done.txt\n"
    )
    server.wait(jid, {"RUNNING"})
    server.kill9()
    time.sleep(1)
    restarted = make_server(*extra)
    job = restarted.wait(jid, timeout=60)
    assert job["state"] == "SUCCEEDED", job
    assert (out / "done.txt").read_text().strip() == "done"
    assert len(job["tasks"]) == 1
    ends = [e for e in job["events"] if e["toState"] == "SUCCEEDED"]
    assert len(ends) == 2  # the task's end and the job's end, each recorded once
