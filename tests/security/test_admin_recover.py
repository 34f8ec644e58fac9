"""`gpuyard admin recover --data-dir D`: the way back in once every admin token is revoked.

Before: none (issue 15: "no local way back in once every admin token is revoked"). Now whoever
may open the server's data dir on its machine gets a new platform-admin token in a 0600 file;
anyone else (another uid, a wrong dir) is refused and nothing changes.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import traceback
from pathlib import Path

import httpx
import pytest
import typer

from gpuyard.model import SystemClock
from gpuyard.recovercmd import recover_app as recover_typer
from gpuyard.store import PlatformRole, open_store
from security.helpers import NOBODY

pytestmark = [pytest.mark.e2e]


def recover(data_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuyard", "admin", "recover", "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def recover_as(uid: int, data_dir: Path) -> tuple[int, str]:
    """`gpuyard admin recover` run by another uid (forked, as this interpreter is not
    another uid's to run): its exit status and what it wrote to stderr."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 3
        try:
            sys.stderr = os.fdopen(write, "w")
            os.setgid(uid)
            os.setuid(uid)
            command = typer.main.get_command(recover_typer)
            status = command.main(["--data-dir", str(data_dir)], standalone_mode=False) or 0
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stderr.flush()
            os._exit(status)
    os.close(write)
    with os.fdopen(read) as f:
        said = f.read()
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), said


def revoke_every_admin_token(server) -> None:
    tokens = server.http.get("/api/v1/users/admin/tokens").json()["tokens"]
    for token in tokens:
        r = server.http.delete(f"/api/v1/users/admin/tokens/{token['id']}")
        assert r.status_code == 200, r.text
    assert server.http.get("/api/v1/whoami").status_code == 401  # locked out


def test_recover_gives_a_new_admin_token_to_a_locked_out_platform(server):
    revoke_every_admin_token(server)
    done = recover(server.data_dir)
    assert done.returncode == 0, done.stderr
    path = server.data_dir / "recovered-admin-token"
    assert str(path) in done.stdout
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    token = path.read_text().strip()
    r = httpx.get(f"{server.url}/api/v1/whoami", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200 and r.json()["admin"] is True, r.text


def test_recover_refuses_another_uid_and_a_dir_without_a_database(server, tmp_path):
    before = server.http.get("/api/v1/users/admin/tokens").json()["tokens"]
    status, said = recover_as(NOBODY, server.data_dir)
    assert status == 1 and "cannot open the data dir" in said, said
    empty = tmp_path / "empty"
    empty.mkdir()
    elsewhere = recover(empty)
    assert elsewhere.returncode != 0 and "holds no gpuyard database" in elsewhere.stderr
    assert not (empty / "gpuyard.db").exists()
    assert server.http.get("/api/v1/users/admin/tokens").json()["tokens"] == before


def test_recover_makes_admin_a_platform_admin_again(tmp_path):
    store = open_store(tmp_path, clock=SystemClock())
    store.users.create("admin", PlatformRole.USER)  # demoted, say
    store.close()
    done = recover(tmp_path)
    assert done.returncode == 0, done.stderr
    store = open_store(tmp_path, clock=SystemClock())
    try:
        admin = store.users.get("admin")
        assert admin is not None and admin.is_admin
        token, _ = store.tokens.check((tmp_path / "recovered-admin-token").read_text().strip())
        assert token is not None and token.user == "admin"
    finally:
        store.close()
