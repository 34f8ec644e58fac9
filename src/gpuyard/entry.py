"""The `gpuyard` command: the HTTP client commands (`gpuyard.cli`), plus three commands that
work on this machine: `up` (run the server), `image` (this node's images) and `sim` (replay
a trace through the scheduler).

The local commands are loaded only when one of them runs (click's documented lazy-loading
pattern): the server, image and simulator code pulls in FastAPI, SQLAlchemy and matplotlib,
seconds of start-up that every `gpuyard jobs` would otherwise pay.
"""

from __future__ import annotations

import importlib

import click
import typer
from typer.core import TyperGroup

from gpuyard.cli.main import app

LOCAL_COMMANDS: dict[str, tuple[str, str]] = {
    "up": ("gpuyard.upcmd", "up_app"),
    "image": ("gpuyard.imagecmd", "image_app"),
    "sim": ("gpuyard.simcmd", "sim_app"),
}


class WithLocalCommands(TyperGroup):
    """The HTTP client's command group, plus the local commands, imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*super().list_commands(ctx), *LOCAL_COMMANDS]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in LOCAL_COMMANDS:
            return super().get_command(ctx, cmd_name)
        module, attribute = LOCAL_COMMANDS[cmd_name]
        command = typer.main.get_command(getattr(importlib.import_module(module), attribute))
        command.name = cmd_name
        return command


app.info.cls = WithLocalCommands


def main() -> None:
    app()
