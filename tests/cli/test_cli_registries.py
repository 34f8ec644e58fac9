"""`gpuyard admin registry set|ls|rm` against the real app served by uvicorn
(tests/cli/test_cli_control.py's server over tests/api's world): a platform admin sets a
tenant's login with the password or token on stdin, lists host, username and who set it, and
removes it; the secret is in no output (table, JSON, errors) and never taken from argv; a
tenant admin or member is refused in the server's words, without a traceback."""

from __future__ import annotations

import json

import pytest
import typer

from cli.test_cli_control import Served, served  # noqa: F401 (the fixture, used by name)
from gpuyard.cli.admin_registries import login_body, registry_of, secret_kind

PASSWORD = "cli-registry-Pa55-w0rd"
TOKEN = "cli-registry-t0ken-xyz"
HOST = "registry.lan:5000"


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Served:
    return request.getfixturevalue("served")


def set_login(server: Served, who: str = "root", *extra: str, stdin: str = PASSWORD + "\n"):
    args = ("admin", "registry", "set", "red", HOST, "--username", "redbot", "--password-stdin")
    return server.full(who, *args, *extra, stdin=stdin)


def test_set_then_ls_shows_host_and_username_never_the_password(server):
    r = set_login(server)
    assert r.exit_code == 0, r.output
    assert "tenant red logs in to registry.lan:5000 as redbot" in r.stderr
    assert HOST in r.stdout and "redbot" in r.stdout and PASSWORD not in r.output
    [login] = server.world.store.registries.logins("red")
    assert (login.registry, login.username, login.password) == (HOST, "redbot", PASSWORD)
    r = server.full("root", "admin", "registry", "ls", "red")
    assert r.exit_code == 0, r.output
    for word in ("REGISTRY", "USERNAME", "UPDATED", "BY", HOST, "redbot", "root", "UTC"):
        assert word in r.stdout, word
    assert PASSWORD not in r.output
    r = server.full("root", "admin", "registry", "ls", "red", "-o", "json")
    [entry] = json.loads(r.stdout)["registries"]
    assert entry["registry"] == HOST and entry["username"] == "redbot"
    assert entry["updatedBy"] == "root" and PASSWORD not in r.output
    r = server.full("root", "admin", "registry", "set", "red", HOST, "-u", "redbot",
                    "--password-stdin", "-o", "json", stdin=PASSWORD)  # fmt: skip
    assert json.loads(r.stdout)["username"] == "redbot" and PASSWORD not in r.output


def test_a_token_on_stdin_and_a_docker_login_address(server):
    r = server.full("root", "admin", "registry", "set", "red", "https://index.docker.io/v1/",
                    "--token-stdin", stdin=TOKEN + "\r\n")  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "tenant red logs in to docker.io as token" in r.stderr and TOKEN not in r.output
    [login] = server.world.store.registries.logins("red")
    assert (login.registry, login.username, login.password) == ("docker.io", "token", TOKEN)


def test_rm_removes_and_a_second_rm_says_there_is_none(server):
    assert set_login(server).exit_code == 0
    r = server.full("root", "admin", "registry", "rm", "red", HOST)
    assert r.exit_code == 0, r.output
    assert f"removed tenant red's login for {HOST}" in r.stdout
    assert server.world.store.registries.logins("red") == ()
    r = server.full("root", "admin", "registry", "ls", "red")
    assert "tenant red has no registry logins" in r.stdout
    r = server.full("root", "admin", "registry", "rm", "red", HOST)
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert f"tenant red has no credentials for {HOST} (HTTP 404)" in r.stderr


@pytest.mark.parametrize("who", ["redboss", "alice"])
def test_only_a_platform_admin_may_set_list_or_remove(server, who):
    r = set_login(server, who)
    assert r.exit_code == 1 and "Traceback" not in r.output and PASSWORD not in r.output
    assert f"only a platform admin may set registry credentials; {who} is not one" in r.stderr
    assert server.world.store.registries.logins("red") == ()
    assert set_login(server).exit_code == 0
    for verb, args in (("read", ["ls", "red"]), ("remove", ["rm", "red", HOST])):
        r = server.full(who, "admin", "registry", *args)
        assert r.exit_code == 1 and "Traceback" not in r.output, r.output
        assert f"only a platform admin may {verb} registry credentials" in r.stderr
        assert r.stdout == ""
    assert len(server.world.store.registries.logins("red")) == 1


def test_the_secret_comes_from_stdin_only(server):
    r = server.full("root", "admin", "registry", "set", "red", HOST, "-u", "redbot",
                    "--password", PASSWORD)  # fmt: skip
    assert r.exit_code == 2 and "No such option" in r.output
    for flags in ([], ["--password-stdin", "--token-stdin"]):
        r = server.full("root", "admin", "registry", "set", "red", HOST, "-u", "redbot", *flags,
                        stdin=PASSWORD)  # fmt: skip
        assert r.exit_code == 2 and "--password-stdin or --token-stdin" in r.output
    r = server.full("root", "admin", "registry", "set", "red", HOST, "--password-stdin",
                    stdin=PASSWORD)  # fmt: skip
    assert r.exit_code == 2 and "--password-stdin needs --username" in r.output
    r = set_login(server, stdin="\n")
    assert r.exit_code == 2 and "no password on stdin" in r.stderr
    assert server.world.store.registries.logins("red") == ()


def test_refusals_of_the_server_in_words(server):
    r = server.full("root", "admin", "registry", "set", "red", HOST, "-u", "x" * 300,
                    "--password-stdin", stdin=PASSWORD)  # fmt: skip
    assert r.exit_code == 2 and "--username" in r.stderr and PASSWORD not in r.output
    r = server.full("root", "admin", "registry", "ls", "nope")
    assert r.exit_code == 1 and "no tenant nope (HTTP 404)" in r.stderr
    r = server.full("root", "admin", "registry", "rm", "red", "https://")
    assert r.exit_code == 2 and "names no registry host" in r.output


def test_pure_helpers():
    assert registry_of(" https://Registry.lan:5000/v2/ ") == "Registry.lan:5000"
    assert registry_of("ghcr.io/team") == "ghcr.io"
    assert secret_kind("bot", True, False) == "password"
    assert secret_kind(None, False, True) == "token"
    with pytest.raises(typer.BadParameter):
        secret_kind(None, True, False)
    assert login_body(None, "token", "t") == {"token": "t"}
    assert login_body("bot", "password", "p") == {"username": "bot", "password": "p"}
