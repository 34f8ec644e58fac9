"""The `gpuyard` command: the HTTP client commands (`gpuyard.cli`), plus the commands that
work on this machine: `up` (run the server), `image` (this node's images), `sim` (replay a
trace through the scheduler) and `admin recover` (a new admin token, from the data dir).

The local commands are loaded only when one of them runs (click's documented lazy-loading
pattern): the server, image and simulator code pulls in FastAPI, SQLAlchemy and matplotlib,
seconds of start-up that every `gpuyard jobs` would otherwise pay.
"""

from __future__ import annotations

import importlib

import click
import typer
from typer.core import TyperGroup

from gpuyard.cli.admin import admin_app
from gpuyard.cli.main import app

LOCAL_COMMANDS: dict[str, tuple[str, str]] = {
    "up": ("gpuyard.upcmd", "up_app"),
    "image": ("gpuyard.imagecmd", "image_app"),
    "sim": ("gpuyard.simcmd", "sim_app"),
}


LOCAL_ADMIN_COMMANDS: dict[str, tuple[str, str]] = {
    "recover": ("gpuyard.recovercmd", "recover_app"),
}


class WithLocalCommands(TyperGroup):
    """A command group of the HTTP client, plus local commands, imported on first use."""

    local: dict[str, tuple[str, str]] = LOCAL_COMMANDS

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*super().list_commands(ctx), *self.local]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.local:
            return super().get_command(ctx, cmd_name)
        module, attribute = self.local[cmd_name]
        command = typer.main.get_command(getattr(importlib.import_module(module), attribute))
        command.name = cmd_name
        return command


class WithLocalAdminCommands(WithLocalCommands):
    """`gpuyard admin`: the HTTP client's admin commands, plus `recover`."""

    local = LOCAL_ADMIN_COMMANDS


app.info.cls = WithLocalCommands
admin_app.info.cls = WithLocalAdminCommands


def main() -> None:
    app()
