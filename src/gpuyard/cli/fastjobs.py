"""`gpuyard jobs` on the fast path (`gpuyard.cli.fast`): the same options as the full
command's (`--state` repeatable, `--tenant`, `--user`, `--name GLOB`, `--since`, `--limit`,
`--cursor`, `-o table|json`, `--expand`: a job array's children under it), a plain table;
the next page's cursor said on stderr."""

from __future__ import annotations

import argparse
import sys

from gpuyard.cli.basics import EXIT_OK, check_states, more_jobs_hint, print_json
from gpuyard.cli.fast import command_parser, run, wants_color
from gpuyard.cli.jobtree import job_tree
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
    filters = {k: getattr(args, k) for k in ("user", "name", "since", "cursor")}
    data = client.list_jobs(args.state, args.tenant, args.limit, filters)
    if args.output == "json":
        print_json(data)
        return EXIT_OK
    rows = job_tree(data.get("jobs") or [], data.get("arrays"), args.expand)
    sys.stdout.write(jobs_table(rows, color=wants_color(sys.stdout)))
    if hint := more_jobs_hint(data.get("nextCursor")):
        sys.stderr.write(hint + "\n")
    return EXIT_OK


def main(argv: list[str]) -> int:
    top, command = command_parser("jobs")
    command.add_argument("--state", action="append", type=state_name)
    command.add_argument("--tenant")
    command.add_argument("--user")
    command.add_argument("--name")
    command.add_argument("--since")
    command.add_argument("--cursor")
    command.add_argument("--limit", type=positive)
    command.add_argument("--output", "-o", choices=("table", "json"), default="table")
    command.add_argument("--expand", action="store_true")
    return run(argv, top, jobs)
