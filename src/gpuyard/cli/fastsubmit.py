"""`gpuyard submit FILE` on the fast path (`gpuyard.cli.fast`): the new job's id alone on
stdout, the rest on stderr; a rejected spec is each field's path and message (exit 2), as the
full command's. `--tenant` is `gpuyard.cli.fasttenant` (it needs PyYAML: 19 ms of import that
a plain submit does not pay) and `--wait` the full command line's; `gpuyard.entry` picks."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from gpuyard.cli.basics import (
    EXIT_OK,
    EXIT_USAGE,
    HTTP_FORBIDDEN,
    HTTP_INVALID,
    ApiError,
    submit_error_message,
)
from gpuyard.cli.fast import command_parser, fail, run
from gpuyard.cli.plainhttp import PlainClient
from gpuyard.cli.plaintable import spec_errors_text, submitted_text


def spec_file(value: str) -> Path:
    path = Path(value)
    if not path.is_file() or not os.access(path, os.R_OK):
        raise argparse.ArgumentTypeError(f"File {value!r} does not exist or is not readable.")
    return path


def submit_parser(tenant: bool = False) -> argparse.ArgumentParser:
    """`gpuyard [--url URL] submit FILE`, and `--tenant T` when asked."""
    top, command = command_parser("submit")
    command.add_argument("file", type=spec_file)
    if tenant:
        command.add_argument("--tenant", required=True)
    return top


def send(client: PlainClient, spec: bytes, content_type: str, tenant_given: bool) -> int:
    """POST the spec; its id alone on stdout, the rest on stderr; a 422 is exit 2."""
    try:
        job = client.submit_job(spec, content_type)
    except ApiError as exc:
        if exc.status == HTTP_FORBIDDEN:
            return fail(submit_error_message(exc, tenant_given))
        if exc.status != HTTP_INVALID:
            raise
        sys.stderr.write(spec_errors_text(exc.detail, exc.errors))
        return EXIT_USAGE
    sys.stderr.write(f"submitted job {job.get('name', '')!r} ({job.get('state')})\n")
    sys.stdout.write(f"{job.get('id')}\n")
    sys.stderr.write(submitted_text(job))
    return EXIT_OK


def submit(client: PlainClient, args: argparse.Namespace) -> int:
    return send(client, args.file.read_bytes(), "application/yaml", tenant_given=False)


def main(argv: list[str]) -> int:
    return run(argv, submit_parser(), submit)
