"""`gpuyard ssh JOB [TASK] [-l USER] [-i KEY] [-o OPTION] [-t] [-- COMMAND...]`: the system's
OpenSSH client into a task's sshd (OpenPAI's ssh plugin, our `ssh` field) through the
platform, from any machine that reaches the API (docs/exec.md, *gpuyard ssh*).

1. `GET /api/v1/jobs/{id}/ssh` gives the task's login and the job attempt's host key
   (whoever may exec in the job; others are refused as exec refuses them);
2. the key goes into a known_hosts file of its own, in a temporary dir removed afterwards,
   under an alias (`HostKeyAlias`), and `ssh` runs with `StrictHostKeyChecking=yes`: a key
   that differs ends the connection, and there is never a prompt to trust a new one;
3. its `ProxyCommand` is this same program, `gpuyard ssh-proxy` (hidden), which opens the
   port-forward socket with the caller's own token, names the port `"ssh"` (the server
   finds the task's sshd port, after the same checks as any port-forward) and relays its
   stdin and stdout over it (`tunnel.relay`): nothing the caller could not do with
   `gpuyard port-forward`.

The user logs in with their own key (`-i`, or what their ssh client offers by default), whose
public half the job lists in `ssh.authorizedKeys` (OpenPAI: `userssh`). The exit code is
ssh's: the command's, or 255 when ssh itself fails. Standard library and wsproto only (the
fast path's rules, docs/cli.md).
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import quote

from gpuyard.cli.basics import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    ApiError,
    ConnectionLost,
    ServerUnreachable,
    login_of,
    unreachable_message,
)
from gpuyard.cli.fast import fail
from gpuyard.cli.fastexec import refused, split_command, without_verb
from gpuyard.cli.plainhttp import PlainClient
from gpuyard.cli.tunnel import first_frames, relay
from gpuyard.cli.wsclient import WsSession, refusal

VERB, PROXY_VERB = "ssh", "ssh-proxy"
SSH_PORT = "ssh"  # the port a port stream names to reach the task's sshd
ALIAS_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
FIXED_OPTIONS = (  # what makes the check strict; the caller's -o cannot loosen them (first wins)
    "StrictHostKeyChecking=yes",
    "GlobalKnownHostsFile=/dev/null",
    "CheckHostIP=no",
    "UpdateHostKeys=no",
)


def ssh_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpuyard ssh",
        description="ssh into a running task's sshd through the platform (docs/exec.md); "
        "log in with your own key, the one the job's ssh.authorizedKeys (userssh) lists.",
        usage="gpuyard ssh JOB [TASK] [-l USER] [-i KEY] [-o OPTION]... [-t] [-- COMMAND...]",
    )
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("job")
    parser.add_argument("task", nargs="?", help="ROLE/INDEX (default: the job's first task)")
    parser.add_argument("-l", "--user", help="the login (default: the server's, `task`/`root`)")
    parser.add_argument("-i", "--identity", action="append", default=[], metavar="KEY",
                        help="your private key file (ssh -i)")  # fmt: skip
    parser.add_argument("-o", "--option", action="append", default=[], metavar="OPTION",
                        help="an ssh option, as ssh -o")  # fmt: skip
    parser.add_argument("-t", "--tty", action="store_true", help="force a terminal (ssh -t)")
    return parser


def proxy_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpuyard ssh-proxy", add_help=False)
    parser.add_argument("--url")
    parser.add_argument("--session")
    parser.add_argument("job")
    parser.add_argument("task")
    return parser


def host_alias(job: str, task: str) -> str:
    """The name ssh knows the task by, in its known_hosts file and its messages."""
    return ALIAS_UNSAFE.sub("-", f"gpuyard-{job}-{task.replace('/', '-')}")


def proxy_command(url: str, job: str, task: str, session: str) -> str:
    """`gpuyard ssh-proxy` as a ProxyCommand: quoted for /bin/sh, `%` doubled (ssh expands
    `%h`, `%p`, ... in it)."""
    argv = [sys.executable, "-m", "gpuyard", PROXY_VERB, "--url", url, "--session", session,
            job, task]  # fmt: skip
    return shlex.join(argv).replace("%", "%%")


def ssh_argv(
    args: argparse.Namespace, url: str, target: dict[str, object], known_hosts: Path,
    command: list[str],
) -> list[str]:  # fmt: skip
    """The `ssh` command line: the fixed options first (ssh keeps an option's first value)."""
    task = str(target["task"])
    proxy = proxy_command(url, args.job, task, secrets.token_hex(8))
    fixed = [*FIXED_OPTIONS, f"UserKnownHostsFile={known_hosts}",
             f"HostKeyAlias={host_alias(args.job, task)}", f"ProxyCommand={proxy}"]  # fmt: skip
    argv = ["ssh"]
    for option in [*fixed, *args.option]:
        argv += ["-o", option]
    for key in args.identity:
        argv += ["-i", key]
    argv += ["-l", args.user or str(target["user"])] + (["-t"] if args.tty else [])
    return [*argv, host_alias(args.job, task), *command]


def known_hosts_line(job: str, target: dict[str, object]) -> str:
    return f"{host_alias(job, str(target['task']))} {target['hostKey']}\n"


def ssh_target(url: str, token: str | None, job: str, task: str | None) -> dict[str, object]:
    """`GET /api/v1/jobs/{id}/ssh`: `{task, user, port, hostKey}`."""
    client = PlainClient(url, token)
    try:
        query = [("task", task)] if task else None
        answer = client.call("GET", f"/api/v1/jobs/{quote(job, safe='')}/ssh", query=query)
    finally:
        client.close()
    if not isinstance(answer, dict) or not isinstance(answer.get("hostKey"), str):
        raise ConnectionLost(url, "the reply to GET .../ssh has no hostKey")
    return answer


def run_ssh(argv: list[str]) -> int:
    head, command = split_command(argv)
    args = ssh_parser().parse_args(without_verb(head, VERB))
    client = shutil.which("ssh")
    if client is None:
        return fail("gpuyard ssh needs an OpenSSH client (ssh) on PATH: install openssh-client")
    url, token = login_of(args.url)
    target = ssh_target(url, token, args.job, args.task)
    with tempfile.TemporaryDirectory(prefix="gpuyard-ssh-") as tmp:
        known_hosts = Path(tmp) / "known_hosts"
        known_hosts.write_text(known_hosts_line(args.job, target))
        line = ssh_argv(args, url, target, known_hosts, command)
        env = {**os.environ, "SHELL": "/bin/sh"}  # ssh runs the ProxyCommand with $SHELL
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is ssh's to handle
        try:
            return subprocess.call([client, *line[1:]], env=env)
        finally:
            signal.signal(signal.SIGINT, previous)


def run_proxy(argv: list[str]) -> int:
    """ssh's ProxyCommand: the task's sshd over the port-forward socket, on stdin/stdout."""
    args = proxy_parser().parse_args(without_verb(argv, PROXY_VERB))
    url, token = login_of(args.url)
    ws = WsSession(url, token, f"/api/v1/jobs/{quote(args.job, safe='')}/portforward")
    try:
        ws.send_json({"port": SSH_PORT, "task": args.task, "session": args.session})
        first_frames(ws)
        end = relay(ws, sys.stdin.fileno(), sys.stdout.fileno())
    finally:
        ws.close()
    if "error" in end:
        raise refusal(end)
    return 0


def main(argv: list[str]) -> int:
    """Either verb; failures as every command's (1 refused, 2 bad usage, 3 unreachable), in
    the ProxyCommand prefixed `gpuyard ssh:` (they show among ssh's own messages)."""
    proxy = next((a for a in split_command(argv)[0] if a in (VERB, PROXY_VERB)), VERB) == PROXY_VERB
    prefix = "gpuyard ssh: " if proxy else ""
    try:
        return run_proxy(argv) if proxy else run_ssh(argv)
    except ServerUnreachable as exc:
        return fail(prefix + unreachable_message(exc.url), EXIT_UNREACHABLE)
    except ConnectionLost as exc:
        return fail(f"{prefix}{exc}", EXIT_UNREACHABLE)
    except ApiError as exc:
        code = EXIT_USAGE if exc.status == 422 else EXIT_FAILED
        return fail(prefix + refused(exc), code)
    except OSError as exc:  # the known_hosts file, ssh itself, or the relay's stdin/stdout
        return fail(f"gpuyard ssh: {exc}")
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
