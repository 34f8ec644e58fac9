"""`gpuyard submit FILE [--tenant T]` on the fast path (`gpuyard.cli.fast`): the new job's
id alone on stdout, the rest on stderr; a rejected spec is each field's path and message
(exit 2), as the full command's. `--wait` is the full command line's (`gpuyard.entry`)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from gpuyard.cli.basics import EXIT_OK, EXIT_USAGE, HTTP_INVALID, ApiError
from gpuyard.cli.fast import command_parser, fail, run
from gpuyard.cli.plainhttp import PlainClient
from gpuyard.cli.plaintable import spec_errors_text, submitted_text
from gpuyard.cli.tenantflag import with_tenant


def spec_file(value: str) -> Path:
    path = Path(value)
    if not path.is_file() or not os.access(path, os.R_OK):
        raise argparse.ArgumentTypeError(f"File {value!r} does not exist or is not readable.")
    return path


def submit(client: PlainClient, args: argparse.Namespace) -> int:
    spec, content_type = args.file.read_bytes(), "application/yaml"
    if args.tenant is not None:
        try:
            spec, content_type = with_tenant(spec, args.tenant), "application/json"
        except ValueError as exc:
            return fail(f"error: {exc}", EXIT_USAGE)
    try:
        job = client.submit_job(spec, content_type)
    except ApiError as exc:
        if exc.status != HTTP_INVALID:
            raise
        sys.stderr.write(spec_errors_text(exc.detail, exc.errors))
        return EXIT_USAGE
    sys.stderr.write(f"submitted job {job.get('name', '')!r} ({job.get('state')})\n")
    sys.stdout.write(f"{job.get('id')}\n")
    sys.stderr.write(submitted_text(job))
    return EXIT_OK


def main(argv: list[str]) -> int:
    top, command = command_parser("submit")
    command.add_argument("file", type=spec_file)
    command.add_argument("--tenant")
    return run(argv, top, submit)
