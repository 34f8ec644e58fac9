"""`gpuyard ssh`'s command line (no server): the dispatcher sends `ssh` and its hidden
ProxyCommand verb to the fast module; the ssh command line checks the host key strictly
(options the caller adds cannot loosen it: ssh keeps an option's first value), its
ProxyCommand is this gpuyard with the same server and the caller's own login, quoted for
/bin/sh with `%` doubled; the known_hosts line names the task's alias. The real thing:
tests/e2e/test_ssh_cli_e2e.py."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from gpuyard.cli import fastssh
from gpuyard.entry import route

TARGET = {"task": "main/0", "user": "task", "port": 20001, "hostKey": "ssh-ed25519 AAAAkey"}


def options(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, arg in enumerate(argv) if arg == "-o"]


def test_ssh_and_its_proxy_go_to_the_fast_module() -> None:
    assert route(["ssh", "JOB", "--", "echo", "hi"]) == "gpuyard.cli.fastssh"
    assert route(["--url", "http://x", "ssh-proxy", "JOB", "main/0"]) == "gpuyard.cli.fastssh"
    assert route(["ssh", "--help"]) == "gpuyard.cli.fastssh"


def test_the_host_key_is_checked_strictly_whatever_the_caller_adds() -> None:
    args = fastssh.ssh_parser().parse_args(
        ["3f2a", "-i", "/k", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/x"]
    )
    argv = fastssh.ssh_argv(args, "http://yard:8080", TARGET, Path("/tmp/kh"), ["echo", "hi"])
    opts = options(argv)
    assert opts.index("StrictHostKeyChecking=yes") < opts.index("StrictHostKeyChecking=no")
    assert opts.index("UserKnownHostsFile=/tmp/kh") < opts.index("UserKnownHostsFile=/x")
    assert "GlobalKnownHostsFile=/dev/null" in opts and "HostKeyAlias=gpuyard-3f2a-main-0" in opts
    assert argv[-3:] == ["gpuyard-3f2a-main-0", "echo", "hi"]
    assert argv[argv.index("-l") + 1] == "task" and argv[argv.index("-i") + 1] == "/k"
    line = fastssh.known_hosts_line("3f2a", TARGET)
    assert line == "gpuyard-3f2a-main-0 ssh-ed25519 AAAAkey\n"


def test_the_proxy_command_is_this_gpuyard_with_the_same_server_quoted_and_percent_safe() -> None:
    command = fastssh.proxy_command("http://yard:8080/a%20b", "j;rm -rf", "main/0", "s1")
    words = shlex.split(command.replace("%%", "%"))
    assert words[:4] == [sys.executable, "-m", "gpuyard", "ssh-proxy"]
    assert words[4:] == ["--url", "http://yard:8080/a%20b", "--session", "s1", "j;rm -rf",
                         "main/0"]  # fmt: skip
    assert "/a%%20b " in command  # doubled: ssh would read %2 as an escape


def test_bad_usage_and_an_unreachable_server_are_words_and_exit_codes(capsys) -> None:
    assert fastssh.main(["ssh", "JOB", "--url", "http://127.0.0.1:9"]) == 3
    assert "cannot reach gpuyard" in capsys.readouterr().err
    assert fastssh.main(["--url", "http://127.0.0.1:9", "ssh-proxy", "JOB", "main/0"]) == 3
    assert capsys.readouterr().err.startswith("gpuyard ssh: cannot reach")
