"""The admin and login helpers of the CLI: option parsing, tenant bodies, the saved login."""

from __future__ import annotations

import stat

import pytest
import typer
from rich.console import Console

from gpuyard.cli.admin import parse_count, parse_membership, parse_setting, tenant_body
from gpuyard.cli.basics import load_config, resolve_login, save_config
from gpuyard.cli.login import read_token
from gpuyard.cli.render_admin import quota_text, render_tenants, render_whoami


def test_parse_count():
    assert parse_count("A100-80GB:4", True) == ("A100-80GB", 4)
    assert parse_count("2", False) == (None, 2)
    for bad in ("4", "A100:x", "A100:-1", ":3"):
        with pytest.raises(typer.BadParameter):
            parse_count(bad, True)


def test_parse_membership_and_setting():
    assert parse_membership("vision") == {"tenant": "vision", "role": "member"}
    assert parse_membership("nlp:viewer") == {"tenant": "nlp", "role": "viewer"}
    with pytest.raises(typer.BadParameter, match="tenant-admin, member, viewer"):
        parse_membership("nlp:boss")
    assert parse_setting("maxGpusPerUser=8") == ("maxGpusPerUser", 8)
    assert parse_setting("budgetPeriod=week") == ("budgetPeriod", "week")
    assert parse_setting('storageRoots=["/a"]') == ("storageRoots", ["/a"])


def test_tenant_body_for_create_and_update():
    body = tenant_body(
        None,
        ["A100:4", "H100:2"],
        ["2", "H100:1"],
        ["A100:1"],
        {"weight": 2.0, "queuePolicy": None},
        ["allowRoot=true"],
    )
    assert body == {
        "weight": 2.0,
        "allowRoot": True,
        "quotas": [
            {"flavor": "A100", "guaranteed": 4, "borrowingLimit": 2, "lendingLimit": 1},
            {"flavor": "H100", "guaranteed": 2, "borrowingLimit": 1},
        ],
    }
    current = [{"flavor": "A100", "guaranteed": 4, "borrowingLimit": None}]
    assert tenant_body(current, [], ["3"], [], {}, []) == {
        "quotas": [{"flavor": "A100", "guaranteed": 4, "borrowingLimit": 3}]
    }
    assert tenant_body(current, [], [], [], {"weight": 1.0}, []) == {"weight": 1.0}
    with pytest.raises(typer.BadParameter, match="no quota of flavor V100"):
        tenant_body(current, [], ["V100:1"], [], {}, [])
    assert tenant_body(current, [], [], [], {}, [], ["A100:40000", "H100:8000"]) == {
        "quotas": [
            {"flavor": "A100", "guaranteed": 4, "borrowingLimit": None, "gpuMemoryMB": 40000},
            {"flavor": "H100", "guaranteed": 0, "gpuMemoryMB": 8000},
        ]
    }


def test_saved_login_is_private_and_used_only_for_its_url(tmp_path):
    path = save_config("http://yard:8080", "gy_secret", tmp_path / "gpuyard" / "config.json")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    saved = load_config(path)
    assert resolve_login(None, None, saved) == ("http://yard:8080", "gy_secret")
    assert resolve_login("yard:8080/", None, saved) == ("http://yard:8080", "gy_secret")
    assert resolve_login("http://other", None, saved) == ("http://other", None)
    assert resolve_login(None, "gy_env", saved) == ("http://yard:8080", "gy_env")
    assert resolve_login(None, None, {}) == ("http://127.0.0.1:8080", None)
    assert load_config(tmp_path / "missing.json") == {}


def test_read_token(tmp_path):
    f = tmp_path / "t"
    f.write_text("gy_abc\n")
    assert read_token(None, f) == "gy_abc"
    assert read_token(" gy_x ", None) == "gy_x"
    assert read_token(None, None) is None


def test_render_tenants_and_whoami():
    console = Console(record=True, width=140)
    render_tenants(
        console,
        [
            {
                "name": "vision",
                "weight": 2.0,
                "queuePolicy": "las",
                "quotas": [{"flavor": "A100", "guaranteed": 4, "borrowingLimit": 2}],
                "storageRoots": [],
            }
        ],
    )
    render_whoami(
        console,
        {"name": "alice", "admin": False, "memberships": [{"tenant": "vision", "role": "member"}]},
        "http://y",
    )
    text = console.export_text()
    assert "A100:4 (borrow ≤2)" in text and "none (no dataDir/outputDir)" in text
    assert "alice (user) at http://y" in text and "vision (member)" in text
    assert quota_text({"flavor": "H100", "guaranteed": 1, "lendingLimit": 0}) == "H100:1 (lend ≤0)"
