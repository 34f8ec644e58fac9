"""`gpuyard admin storage set|ls|rm` against the real app served by uvicorn (tests/cli/
test_cli_control.py's server over tests/api's world): a platform admin defines a tenant's
named storage, lists it, removes it; a bad field is refused in the CLI's words; a member lists
but may not define, in the server's words, without a traceback."""

from __future__ import annotations

import json

import pytest

from cli.test_cli_control import Served, served  # noqa: F401 (the fixture, used by name)
from gpuyard.cli.admin_storage import storage_body


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Served:
    return request.getfixturevalue("served")


def test_storage_body():
    assert storage_body("/d", None, False) == {"path": "/d", "readOnly": True}
    assert storage_body("/d", "/mnt/x", True) == {"path": "/d", "readOnly": False,
                                                  "mountPoint": "/mnt/x"}


def test_set_ls_rm(server):
    path = str(server.world.storage / "data")
    r = server.full("root", "admin", "storage", "set", "red", "datasets", path, "--read-write")
    assert r.exit_code == 0, r.output
    assert f"tenant red's storage datasets: {path} at /mnt/datasets, read-write" in r.stderr
    r = server.full("alice", "admin", "storage", "ls", "red")
    assert r.exit_code == 0, r.output
    for word in ("NAME", "MOUNT POINT", "datasets", "/mnt/datasets", "rw", "root"):
        assert word in r.stdout, word
    r = server.full("root", "admin", "storage", "ls", "red", "-o", "json")
    [entry] = json.loads(r.stdout)["storage"]
    assert (entry["name"], entry["path"], entry["readOnly"]) == ("datasets", path, False)
    r = server.full("root", "admin", "storage", "rm", "red", "datasets")
    assert r.exit_code == 0 and "removed tenant red's storage datasets" in r.stdout, r.output
    r = server.full("root", "admin", "storage", "ls", "red")
    assert "tenant red has no named storage" in r.stdout


def test_refusals_in_words(server):
    r = server.full("root", "admin", "storage", "set", "red", "x", "/etc", "--mount-point", "/x")
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    assert "path: /etc is outside the storage roots of tenant red" in r.stderr
    assert "mountPoint: must lie below /mnt" in r.stderr
    r = server.full("alice", "admin", "storage", "set", "red", "x", str(server.world.storage))
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert "only a platform admin may set a tenant's storage; alice is not one" in r.stderr
