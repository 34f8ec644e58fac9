"""The data dir is the server's alone: 0700 dirs, 0600 files, whatever the umask.

Before: with the usual umask 022 the database (`gpuyard.db`, `-wal`, `-shm`) and every
task's `launch.json`, `task.json` and `bundle/config.json` (the job's env, secrets included)
were world-readable, in world-searchable dirs: any local user, or a task that saw the host's
files, could read them. Now the data dir and the node's state root are 0700 (a looser data
dir is tightened at start, and the log says so) and those files 0600.
"""

from __future__ import annotations

import os
import stat

import pytest

from security.helpers import NOBODY, run_hostile

pytestmark = [pytest.mark.e2e, pytest.mark.container]

SECRET_JOB = """\
name: holds-a-secret
env:
  API_KEY: s3cret-value
taskRoles:
  main:
    cpuNumber: 0.2
    memoryMB: 128
    command: "sleep 60"
"""


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def loose_umask():
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_platform_files_are_not_readable_by_others(make_server, tmp_path, loose_umask):
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    os.chmod(data, 0o755)  # an existing data dir as an older gpuyard left it
    server = make_server()
    job = server.submit(SECRET_JOB)
    server.wait(job, {"RUNNING"})
    task = data / "node" / "tasks" / f"{job}-a1-main-0"
    files = [
        data / "gpuyard.db",
        data / "gpuyard.db-wal",
        data / "gpuyard.db-shm",
        data / "admin-token",
        task / "launch.json",
        task / "task.json",
        task / "bundle" / "config.json",
    ]
    loose = {str(p): oct(mode(p)) for p in files if mode(p) & 0o077}
    assert not loose, f"readable by others: {loose}"
    assert mode(data) == 0o700 and mode(data / "node") == 0o700
    assert "had mode 755; set to 0700" in server.log_path.read_text()
    assert b"s3cret-value" in (task / "launch.json").read_bytes()  # the file checked is it
    for path in (task / "launch.json", data / "gpuyard.db"):
        result = run_hostile("read", str(path), str(NOBODY))
        assert result["read"] is False, f"uid {NOBODY} read {path}"
