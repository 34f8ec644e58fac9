"""`gpuyard admin node …`: take a node out of scheduling and back (platform admins).

    gpuyard admin node cordon gpu-7 --reason "fan replacement"
    gpuyard admin node drain gpu-7 --deadline 2h
    gpuyard admin node uncordon gpu-7

cordon: no new work, running jobs go on. drain: the same, and once `--deadline` passes the
jobs still running there are preempted (requeued elsewhere, not counted as a retry); without
a deadline they may finish however long they take. uncordon undoes either.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.text import Text

from gpuyard.cli.basics import print_json
from gpuyard.cli.render import render_nodes
from gpuyard.cli.session import Output, api_errors, session_of

node_app = typer.Typer(help="Cordon, drain and uncordon nodes.", no_args_is_help=True)

Reason = Annotated[str | None, typer.Option("--reason", help="Why (shown on `gpuyard nodes`).")]
Deadline = Annotated[
    str | None,
    typer.Option(
        "--deadline",
        metavar="DURATION",
        help="Preempt the jobs still running after this long (90s, 30m, 2h); default: never.",
    ),
]
OutputOpt = Annotated[Output, typer.Option("--output", "-o")]


def cordon_body(reason: str | None, deadline: str | None) -> dict[str, Any]:
    return {k: v for k, v in (("reason", reason), ("deadline", deadline)) if v is not None}


def _show(ctx: typer.Context, node: dict[str, Any], output: Output, verb: str) -> None:
    session = session_of(ctx)
    if output is Output.json:
        print_json(node)
        return
    session.err.print(Text(f"{verb} node {node.get('name')}"))
    render_nodes(session.out, [node])


@node_app.command("cordon")
def cordon(
    ctx: typer.Context, name: str, reason: Reason = None, output: OutputOpt = Output.table
) -> None:
    """No new work on NAME; what runs there goes on."""
    session = session_of(ctx)
    with api_errors(session):
        node = session.client.node_action(name, "cordon", cordon_body(reason, None))
    _show(ctx, node, output, "cordoned")


@node_app.command("drain")
def drain(
    ctx: typer.Context,
    name: str,
    deadline: Deadline = None,
    reason: Reason = None,
    output: OutputOpt = Output.table,
) -> None:
    """Cordon NAME and let its jobs finish; preempt those still running after --deadline."""
    session = session_of(ctx)
    with api_errors(session):
        node = session.client.node_action(name, "drain", cordon_body(reason, deadline))
    _show(ctx, node, output, "draining")


@node_app.command("uncordon")
def uncordon(ctx: typer.Context, name: str, output: OutputOpt = Output.table) -> None:
    """NAME takes new work again (undoes cordon and drain)."""
    session = session_of(ctx)
    with api_errors(session):
        node = session.client.node_action(name, "uncordon", None)
    _show(ctx, node, output, "uncordoned")
