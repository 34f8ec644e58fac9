"""The fast path of the two commands people and scripts run most, `gpuyard submit FILE` (not
`--wait`: `gpuyard.cli.fastsubmit`) and `gpuyard jobs` (`gpuyard.cli.fastjobs`), in tens of
milliseconds instead of ~400 (docs/cli.md, docs/benchmarks.md); this module is what both
share: the command line around the command, the client, failures turned into words and exit
codes.

Standard library only (and PyYAML for `submit --tenant`): no typer (150 ms with its pydantic
coercion), no rich (50 ms), no httpx (90 ms with its TLS context). `gpuyard.entry` sends a
command here when it is one of these and asks for no help; everything else goes to the full
typer command line (`gpuyard.cli.full`), whose `submit` and `jobs` take the same options,
print the same words and exit with the same codes.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from io import TextIOBase

from gpuyard.cli.basics import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_UNREACHABLE,
    ApiError,
    ConnectionLost,
    ServerUnreachable,
    error_message,
    login_of,
    unreachable_message,
)
from gpuyard.cli.plainhttp import PlainClient

Action = Callable[[PlainClient, argparse.Namespace], int]


def command_parser(name: str) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """`gpuyard [--url URL] NAME ...`: (the whole line's parser, the command's, to fill)."""
    top = argparse.ArgumentParser(prog="gpuyard", add_help=False)
    top.add_argument("--url")
    commands = top.add_subparsers(dest="command", required=True)
    return top, commands.add_parser(name, add_help=False)


def run(argv: list[str], top: argparse.ArgumentParser, action: Action) -> int:
    """Parse `argv` (exit 2 on bad usage), run `action` on a client; the exit code."""
    args = top.parse_args(argv)
    try:
        client = PlainClient(*login_of(args.url))
        try:
            return action(client, args)
        finally:
            client.close()
    except ServerUnreachable as exc:
        return fail(unreachable_message(exc.url), EXIT_UNREACHABLE)
    except ConnectionLost as exc:
        return fail(str(exc), EXIT_UNREACHABLE)
    except ApiError as exc:
        return fail(error_message(exc))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def wants_color(stream: TextIOBase) -> bool:
    """Colours on a terminal, unless NO_COLOR is set (https://no-color.org)."""
    return stream.isatty() and not os.environ.get("NO_COLOR")


def fail(message: str, code: int = EXIT_FAILED) -> int:
    sys.stderr.write(message + "\n")
    return code
