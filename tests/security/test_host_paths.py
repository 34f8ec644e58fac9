"""A task's host dirs and identity, attacked by a hostile member through real jobs on the real
server: symlink swaps after submission, another tenant's files, the host's files, and start
failures the spec causes.

Each test failed on the build before per-tenant ids and launch-time path pinning (findings 1,
2 and 4 of issue 15) and passes now.
"""

from __future__ import annotations

import os
import stat
import textwrap
from pathlib import Path

import pytest

from security.helpers import make_tenant

INVALID = "InvalidSpec"


def job(name: str, command: str, *, tenant: str = "default", gpus: int = 0, **dirs: Path) -> str:
    lines = [f"name: {name}", f"tenant: {tenant}", "retryCount: 3"]
    lines += [f"{field}: {path}" for field, path in dirs.items()]
    body = textwrap.indent(command, " " * 6)
    lines += ["taskRoles:", "  main:", f"    gpuNumber: {gpus}", "    command: |", body]
    return "\n".join(lines) + "\n"


def refused_at_launch(server, job_id: str) -> dict:
    """The job ended FAILED at its first attempt with InvalidSpec: no retry, no loop."""
    job_ = server.wait(job_id, timeout=60)
    assert job_["state"] == "FAILED" and job_["reason"] == INVALID, job_
    assert job_["attempt"] == 1, job_["events"]
    return job_


def test_a_symlink_swapped_in_after_submission_is_not_followed(server):
    """Job 1 plants `evil -> /etc` in its output dir; job 2, submitted before the link existed
    (so its submit check passed), names `evil/x`: it must not get a writable /etc/x, nor the
    platform's data dir as /data through a second link."""
    w, planted = server.storage / "w", Path("/etc/gpuyard-swap-test")
    assert not planted.exists()
    plant = (
        "while [ ! -e /output/go ]; do sleep 0.05; done\n"
        f"ln -s /etc /output/evil && ln -s {server.data_dir} /output/platform\n"
    )
    first = server.submit(job("plant", plant, gpus=4, outputDir=w))
    server.wait(first, {"RUNNING"})
    swapped_out = server.submit(job("out", "echo pwned > /output/pwned", gpus=1,
                                    outputDir=w / "evil" / planted.name))
    swapped_data = server.submit(job("data", "cat /data/admin-token", gpus=1,
                                     dataDir=w / "platform"))
    (w / "go").touch()
    assert server.wait(first)["state"] == "SUCCEEDED"
    try:
        for job_id in (swapped_out, swapped_data):
            message = refused_at_launch(server, job_id)["message"]
            assert "symbolic link" in message and "/etc" not in message.replace(str(w), "")
        assert not planted.exists()
        assert server.token not in server.logs(swapped_data)
    finally:
        if planted.is_dir():
            (planted / "pwned").unlink(missing_ok=True)
            planted.rmdir()


def test_tenants_run_as_their_own_uids_and_cannot_read_each_others_files(server, tmp_path):
    """Tenant C's job writes a 0600 and a 0644 file under C's root; tenant A's job, on the same
    node, sees neither (nor C's root at all), and runs as another uid."""
    c_root, a_root = tmp_path / "c-root", tmp_path / "a-root"
    c_uid, a_uid = make_tenant(server, "c", c_root), make_tenant(server, "a", a_root)
    assert c_uid != a_uid
    for root, uid in ((c_root, c_uid), (a_root, a_uid)):  # made by the platform, its own
        st = root.stat()
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (uid, uid, 0o700)
    writer = "umask 077; echo c-secret > /output/secret; umask 022; echo c-open > /output/open"
    c_job = server.wait(server.submit(job("c", writer, tenant="c", outputDir=c_root / "out")))
    assert c_job["state"] == "SUCCEEDED", c_job
    assert (c_root / "out" / "open").stat().st_uid == c_uid
    reader = (
        "id -u\n"
        f"cat {c_root}/out/secret {c_root}/out/open 2>&1\n"
        f"ls {c_root} {tmp_path} 2>&1\n"
    )
    a_job = server.wait(server.submit(job("a", reader, tenant="a", outputDir=a_root / "o")))
    log = server.logs(a_job["id"])
    assert log.splitlines()[0] == str(a_uid), log
    assert "c-secret" not in log and "c-open" not in log
    assert "No such file" in log  # the host's storage is not in a task's view at all
    # and naming C's root as its own data is refused before anything runs
    r = server.http.post("/api/v1/jobs", content=job("steal", "true", tenant="a",
                                                     dataDir=c_root / "out"),
                         headers={"Content-Type": "application/yaml"})
    assert r.status_code == 422 and r.json()["errors"][0]["path"] == "dataDir", r.text


def test_a_task_sees_only_the_hosts_system_dirs(server):
    """No home dirs, no /srv, /var or /root, no data dir, no password hashes."""
    probe = (
        f"for p in /root /home /srv /var /mnt {server.data_dir} {server.storage}; do\n"
        "  [ -e $p ] && ls -A $p | head -1 | grep -q . && echo visible:$p\n"
        "done\n"
        "cat /etc/shadow /etc/gshadow 2>/dev/null | grep -c : || true\n"
        "ls /usr/bin/env >/dev/null && echo usr-ok\n"
    )
    job_ = server.wait(server.submit(job("probe", probe)))
    assert job_["state"] == "SUCCEEDED", job_
    log = server.logs(job_["id"])
    assert "visible:" not in log, log
    assert log.split() == ["0", "usr-ok"], log


@pytest.mark.parametrize("kind", ["through-a-file", "not-enterable"])
def test_a_start_failure_the_spec_causes_is_invalid_and_never_retried(server, kind):
    """ENOTDIR (a path through a file) and a dir the tenant's user may not enter end the job
    once, as InvalidSpec; they used to be AgentError, retried 2-8 times a second forever (or
    made as root)."""
    (server.storage / "file").write_text("not a dir")
    os.chmod(server.storage / "file", 0o644)
    if kind == "through-a-file":
        out = server.storage / "file" / "x"
    else:  # made by root, 0700: the tenant's user may not enter it
        locked = server.storage / "locked"
        locked.mkdir(mode=0o700)
        out = locked / "x"
    job_ = refused_at_launch(server, server.submit(job(kind, "true", outputDir=out)))
    assert len(job_["events"]) <= 4, job_["events"]


def test_the_tasks_of_a_job_make_a_missing_output_dir_together(server):
    """Four tasks racing to create the same missing outputDir all start (one used to fail with
    EEXIST, ending the attempt while the other tasks' user code still ran)."""
    out = server.storage / "race" / "a" / "b"
    spec = job("race", "touch /output/$GPUYARD_TASK_INDEX", outputDir=out).replace(
        "  main:\n", "  main:\n    taskNumber: 4\n    cpuNumber: 0.25\n    memoryMB: 64\n"
    )
    for _ in range(3):
        done = server.wait(server.submit(spec))
        assert done["state"] == "SUCCEEDED" and done["attempt"] == 1, done["events"]
        assert sorted(p.name for p in out.iterdir()) == ["0", "1", "2", "3"]
        for p in out.iterdir():
            p.unlink()
        (server.storage / "race").rename(server.storage / f"race-{done['id']}")
