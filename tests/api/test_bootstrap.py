"""First start: the platform admin, the default tenant and the admin token file."""

from __future__ import annotations

import stat

from fastapi.testclient import TestClient

from builders import make_node
from fake_engine import FakeEngine
from gpuyard.api import create_app
from gpuyard.api.services.bootstrap import bootstrap
from gpuyard.controller import Controller
from gpuyard.model import FlavorQuota, ManualClock
from gpuyard.store import TenantRole, open_store


def test_an_empty_store_gets_an_admin_a_default_tenant_and_a_token_file(tmp_path):
    clock = ManualClock(1000.0)
    store = open_store(tmp_path, clock=clock)
    nodes = [make_node("n1", gpus=4), make_node("n2", gpus=2, gpu_type="H100")]
    path = bootstrap(store, nodes, tmp_path)
    assert path == tmp_path / "admin-token"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    default = store.tenants.get("default").tenant
    assert default.quotas == (FlavorQuota("A100-80GB", 4), FlavorQuota("H100", 2))
    assert default.storage_roots == (str(tmp_path / "storage"),)  # its own: not the host's /tmp
    assert default.uid is not None and (tmp_path / "storage").stat().st_uid == default.uid
    assert stat.S_IMODE((tmp_path / "storage").stat().st_mode) == 0o700
    assert (tmp_path / "storage").is_dir()
    admin = store.users.get("admin")
    assert admin.is_admin and admin.role_in("default") == TenantRole.TENANT_ADMIN
    token = path.read_text().strip()
    client = TestClient(create_app(Controller(store, FakeEngine(*nodes), clock)))
    me = client.get("/api/v1/whoami", headers={"Authorization": f"Bearer {token}"})
    assert me.json()["name"] == "admin"
    assert bootstrap(store, nodes, tmp_path) is None  # not empty any more: nothing changes
    assert path.read_text().strip() == token


def test_storage_roots_can_be_given(tmp_path):
    store = open_store(tmp_path)
    nfs = str(tmp_path / "mnt" / "nfs")  # a missing root is made: not on the host's /mnt
    bootstrap(store, [make_node()], tmp_path, [nfs])
    assert store.tenants.get("default").tenant.storage_roots == (nfs,)
