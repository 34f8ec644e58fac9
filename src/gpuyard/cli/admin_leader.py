"""`gpuyard admin leader`: which of the servers on one database leads (runs the controller),
its term and heartbeat, and the role of the server asked (docs/ha.md)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.text import Text

from gpuyard.cli.basics import print_json
from gpuyard.cli.session import Output, api_errors, session_of


def leader_lines(got: dict[str, Any]) -> list[str]:
    leader = got.get("leader")
    if not leader:
        first = "no server has led yet"
    else:
        first = (
            f"leader {leader['id']} at {leader['address']}, term {leader['term']}, "
            f"heartbeat {leader['heartbeatAgeS']:.1f} s ago"
        )
    return [first, f"asked {got['server']}: {got['role']}"]


def leader(
    ctx: typer.Context,
    output: Annotated[Output, typer.Option("--output", "-o")] = Output.table,
) -> None:
    """Which server leads (runs the controller), its term, and this server's role."""
    session = session_of(ctx)
    with api_errors(session):
        got = session.client.get_leader()
    if output is Output.json:
        print_json(got)
        return
    for line in leader_lines(got):
        session.out.print(Text(line))
