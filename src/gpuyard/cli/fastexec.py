"""`gpuyard exec JOB [--task ROLE/I] [-i] [-t] -- CMD...` and
`gpuyard port-forward JOB [--task ROLE/I] [--address ADDR] LOCAL:REMOTE`: into a running task
over the API's WebSocket (`tunnel.py`), on the fast path (standard library and wsproto: a
round trip of `exec JOB -- true` is measured against `crun exec` in bench/exec_latency.py).

exec's exit code is the command's; gpuyard's own failures are those of every command
(1 refused, 2 bad usage or a field the server refused, 3 unreachable), with their message on
stderr. `-t` gives the command a terminal (raw mode here, resized with this one), `-i` sends
this stdin to it; `-it` both, as `docker exec` and `kubectl exec`.
"""

from __future__ import annotations

import argparse

from gpuyard.cli.basics import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    ApiError,
    ConnectionLost,
    ServerUnreachable,
    error_message,
    login_of,
    unreachable_message,
)
from gpuyard.cli.fast import fail
from gpuyard.cli.tunnel import forward, interact, open_exec

TASK_HELP = "the task, ROLE/INDEX (default: the job's first task)"


def exec_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpuyard exec",
        description="Run a command in a running task's container (docs/exec.md).",
        usage="gpuyard exec JOB [--task ROLE/I] [-i] [-t] -- COMMAND [ARG...]",
    )
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("job")
    parser.add_argument("--task", help=TASK_HELP)
    parser.add_argument("-i", "--stdin", action="store_true", help="send this stdin to it")
    parser.add_argument("-t", "--tty", action="store_true", help="give it a terminal")
    return parser


def port_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpuyard port-forward",
        description="Forward a local TCP port to a port inside a running task (docs/exec.md).",
        usage="gpuyard port-forward JOB [--task ROLE/I] [--address ADDR] LOCAL:REMOTE",
    )
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("job")
    parser.add_argument("ports", metavar="LOCAL:REMOTE", help="e.g. 8888:8888, or :8888")
    parser.add_argument("--task", help=TASK_HELP)
    parser.add_argument("--address", default="127.0.0.1", help="local address to listen on")
    return parser


def split_command(argv: list[str]) -> tuple[list[str], list[str]]:
    """(gpuyard's arguments, the command after `--`), global `--url` moved after the verb."""
    if "--" in argv:
        at = argv.index("--")
        return argv[:at], argv[at + 1 :]
    return argv, []


def without_verb(args: list[str], verb: str) -> list[str]:
    """`[--url U] VERB rest` → `rest [--url U]`."""
    at = args.index(verb)
    return args[at + 1 :] + args[:at]


def run_exec(argv: list[str]) -> int:
    head, command = split_command(argv)
    args = exec_parser().parse_args(without_verb(head, "exec"))
    if not command:
        return fail("exec needs a command after --, e.g. gpuyard exec JOB -- sh", EXIT_USAGE)
    url, token = login_of(args.url)
    ws = open_exec(url, token, args.job, args.task, command, args.tty)
    return interact(ws, args.tty, args.stdin or args.tty)


def parse_ports(text: str) -> tuple[int, int]:
    local, sep, remote = text.rpartition(":")
    if not sep:
        local, remote = text, text
    try:
        lport, rport = int(local or 0), int(remote)
    except ValueError:
        raise ValueError(f"ports must be LOCAL:REMOTE numbers, got {text!r}") from None
    if not (0 <= lport < 65536 and 0 < rport < 65536):
        raise ValueError(f"ports must be 1-65535 (LOCAL may be 0 or empty: any), got {text!r}")
    return lport, rport


def run_port_forward(argv: list[str]) -> int:
    args = port_parser().parse_args(without_verb(argv, "port-forward"))
    try:
        lport, rport = parse_ports(args.ports)
    except ValueError as exc:
        return fail(f"gpuyard port-forward: {exc}", EXIT_USAGE)
    url, token = login_of(args.url)

    def ready(address: tuple[str, int]) -> None:
        target = f"{args.job} {args.task or ''}".strip()
        print(f"Forwarding {address[0]}:{address[1]} -> {target} port {rport}", flush=True)

    try:
        forward(url, token, args.job, args.task, (args.address, lport), rport, ready)
    except OSError as exc:
        return fail(f"gpuyard port-forward: cannot listen on {args.address}:{lport}: {exc}")
    return 0


def main(argv: list[str]) -> int:
    verb = "port-forward" if "port-forward" in split_command(argv)[0] else "exec"
    try:
        return run_port_forward(argv) if verb == "port-forward" else run_exec(argv)
    except ServerUnreachable as exc:
        return fail(unreachable_message(exc.url), EXIT_UNREACHABLE)
    except ConnectionLost as exc:
        return fail(str(exc), EXIT_UNREACHABLE)
    except ApiError as exc:
        code = EXIT_USAGE if exc.status == 422 else EXIT_FAILED
        return fail(refused(exc), code)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def refused(exc: ApiError) -> str:
    """The server's sentence, and each field it refused on a line of its own."""
    lines = [error_message(exc)]
    lines += [f"  {e.get('path')}: {e.get('message')}" for e in exc.errors]
    return "\n".join(lines)
