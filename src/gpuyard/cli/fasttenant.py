"""`gpuyard submit FILE --tenant T` on the fast path: the spec read with PyYAML, its tenant
set (`gpuyard.cli.tenantflag`), sent as JSON; the rest as `gpuyard.cli.fastsubmit`."""

from __future__ import annotations

import argparse

from gpuyard.cli.basics import EXIT_USAGE
from gpuyard.cli.fast import fail, run
from gpuyard.cli.fastsubmit import send, submit_parser
from gpuyard.cli.plainhttp import PlainClient
from gpuyard.cli.tenantflag import with_tenant


def submit(client: PlainClient, args: argparse.Namespace) -> int:
    try:
        spec = with_tenant(args.file.read_bytes(), args.tenant)
    except ValueError as exc:
        return fail(f"error: {exc}", EXIT_USAGE)
    return send(client, spec, "application/json", tenant_given=True)


def main(argv: list[str]) -> int:
    return run(argv, submit_parser(tenant=True), submit)
