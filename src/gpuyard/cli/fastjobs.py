"""`gpuyard jobs` on the fast path (`gpuyard.cli.fast`): the same options as the full
command's (`--state` repeatable, `--tenant`, `--limit`, `-o table|json`), a plain table."""

from __future__ import annotations

import argparse
import sys

from gpuyard.cli.basics import EXIT_OK, check_states, print_json
from gpuyard.cli.fast import command_parser, run, wants_color
from gpuyard.cli.plainhttp import PlainClient
from gpuyard.cli.plaintable import jobs_table


def state_name(value: str) -> str:
    try:
        return check_states([value])[0]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def positive(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number ≥ 1")
    return int(value)


def jobs(client: PlainClient, args: argparse.Namespace) -> int:
    data = client.list_jobs(states=args.state, tenant=args.tenant, limit=args.limit)
    if args.output == "json":
        print_json(data)
    else:
        sys.stdout.write(jobs_table(data.get("jobs") or [], color=wants_color(sys.stdout)))
    return EXIT_OK


def main(argv: list[str]) -> int:
    top, command = command_parser("jobs")
    command.add_argument("--state", action="append", type=state_name)
    command.add_argument("--tenant")
    command.add_argument("--limit", type=positive)
    command.add_argument("--output", "-o", choices=("table", "json"), default="table")
    return run(argv, top, jobs)
