"""`gpuyard notify` and `gpuyard admin mail` against the real app served by uvicorn
(tests/cli/test_cli_control.py's server over tests/api's world): a user sets and reads their
own address and wishes, what an option does not name stays; the relay's password comes from a
file and is never printed; a bad address is exit 2 naming the option; a member may not read
the relay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.test_cli_control import Served, served  # noqa: F401 (the fixture, used by name)


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Served:
    return request.getfixturevalue("served")


def test_notify_sets_and_shows_ones_own_wishes(server):
    r = server.full("alice", "notify", "--email", "alice@example.com", "--on", "failure")
    assert r.exit_code == 0, r.output
    assert "alice: alice@example.com, mailed on failure" in r.stdout
    r = server.full("alice", "notify", "--on", "end")  # the address stays
    assert "alice@example.com, mailed on end" in r.stdout
    r = server.full("alice", "notify", "-o", "json")
    assert json.loads(r.stdout) == {"user": "alice", "email": "alice@example.com", "notify": "end"}
    assert server.world.store.notify.prefs("bob").email is None  # nobody else's changed


def test_notify_a_bad_address_is_exit_2_naming_the_option(server):
    r = server.full("alice", "notify", "--email", "alice at example", "--on", "end")
    assert r.exit_code == 2
    assert "--email" in r.stderr


def test_admin_mail_set_reads_the_password_from_a_file_and_never_prints_it(server, tmp_path):
    secret = tmp_path / "smtp-password"
    secret.write_text("relay-s3cret\n")
    r = server.full(
        "root", "admin", "mail", "set", "--host", "smtp.example.com", "--from",
        "yard@example.com", "--user", "relay", "--password-file", str(secret),
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "smtp.example.com:587 from yard@example.com, STARTTLS, login relay (password set)" in (
        r.stdout
    )
    assert server.world.store.notify.mail_settings().password == "relay-s3cret"
    for args in (["admin", "mail", "show"], ["admin", "mail", "show", "-o", "json"]):
        r = server.full("root", *args)
        assert r.exit_code == 0 and "relay-s3cret" not in r.output and "password" in r.output


def test_admin_mail_show_is_for_platform_admins(server):
    r = server.full("alice", "admin", "mail", "show")
    assert r.exit_code == 1
    assert "only a platform admin may read the mail settings" in r.stderr


def test_admin_mail_set_a_missing_password_file(server, tmp_path: Path):
    r = server.full("root", "admin", "mail", "set", "--host", "h.example.com", "--from",
                    "y@example.com", "--password-file", str(tmp_path / "none"))  # fmt: skip
    assert r.exit_code == 2 and "cannot read the password file" in r.stderr
