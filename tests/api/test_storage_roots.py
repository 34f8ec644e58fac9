"""Storage roots: dataDir and outputDir must resolve under one of the tenant's roots."""

from __future__ import annotations

import os

import pytest

from api.conftest import spec


def dirs(data=None, out=None) -> str:
    return "".join(f"{k}: {v}\n" for k, v in (("dataDir", data), ("outputDir", out)) if v)


def test_dirs_under_a_root_are_accepted(world):
    s = world.storage
    r = world.submit("alice", spec("red", extra=dirs(s / "data", s / "out" / "run1")))
    assert r.status_code == 201, r.text


@pytest.mark.parametrize("field", ["dataDir", "outputDir"])
def test_a_dir_outside_the_roots_is_refused_naming_the_field_and_roots(world, field):
    extra = f"{field}: /etc\n"
    r = world.submit("alice", spec("red", extra=extra))
    assert r.status_code == 422
    (error,) = r.json()["errors"]
    assert error["path"] == field
    assert "/etc is outside the storage roots of tenant red" in error["message"]
    assert str(world.storage) in error["message"]


def test_a_symlink_out_of_a_root_is_refused(world, tmp_path):
    outside = tmp_path / "secret"
    outside.mkdir()
    link = world.storage / "sneaky"
    os.symlink(outside, link)
    r = world.submit("alice", spec("red", extra=dirs(data=link)))
    assert r.status_code == 422
    message = r.json()["errors"][0]["message"]
    assert f"{link} (after following its links) is outside" in message
    assert str(outside) not in message  # where a link leads is never shown


def test_a_prefix_is_not_a_parent(world):
    sibling = f"{world.storage}-other"
    r = world.submit("alice", spec("red", extra=dirs(out=sibling)))
    assert r.status_code == 422


def test_a_tenant_without_roots_allows_no_dirs(world):
    world.call("root", "PATCH", "/api/v1/tenants/red", json={"storageRoots": []})
    r = world.submit("alice", spec("red", extra=dirs(data=world.storage / "data")))
    assert r.status_code == 422
    assert "has no storage roots" in r.json()["errors"][0]["message"]
    assert world.submit("alice", spec("red")).status_code == 201  # no dirs: fine


def test_roots_are_checked_only_after_membership(world):
    r = world.submit("bob", spec("red", extra=dirs(data="/etc")))
    assert r.status_code == 403  # a non-member learns nothing about red's roots
