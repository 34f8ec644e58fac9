"""The full `gpuyard` command line (typer + rich): every client command of
`gpuyard.cli.main`, plus the commands that work on this machine: `up` (run the server),
`image` (this node's images), `sim` (replay a trace through the scheduler) and
`admin recover` (a new admin token, from the data dir); `exec`, `port-forward` and `run`
are listed with their short help (`gpuyard.entry` sends them to modules that parse their own
arguments, `gpuyard.cli.fastexec` and `gpuyard.cli.fastrun`).

The local commands live in modules of their own, imported by name (importlib) only when one
of them runs: the server, image and simulator code pulls in FastAPI, SQLAlchemy, Ray and
matplotlib, seconds that every `gpuyard jobs` would otherwise pay. A group's `--help` lists
them from the short help kept here, so listing commands imports none of them either.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

import typer
from typer.core import TyperCommand, TyperGroup

from gpuyard.cli.admin import admin_app
from gpuyard.cli.main import app

if TYPE_CHECKING:  # typer's own click (typer ≥ 0.2x vendors it), for annotations only
    from typer._click import Command, Context, HelpFormatter


@dataclass(frozen=True)
class Local:
    """A command loaded on first use: its module, the typer app in it, its short help."""

    module: str
    attribute: str
    help: str

    def load(self, name: str) -> Command:
        loaded = importlib.import_module(self.module)
        command = typer.main.get_command(getattr(loaded, self.attribute))
        command.name = name
        return command


LOCAL_COMMANDS: dict[str, Local] = {
    "up": Local(
        "gpuyard.upcmd", "up_app",
        "Start the platform in the foreground: API, controller, this machine (or a Ray "
        "cluster) as the nodes.",
    ),
    "image": Local("gpuyard.imagecmd", "image_app", "Images on this node: import, pull, list, "
                   "remove."),
    "sim": Local(
        "gpuyard.simcmd", "sim_app",
        "Replay a GPU-cluster trace through the scheduler under several policies, side by side.",
    ),
}

LOCAL_ADMIN_COMMANDS: dict[str, Local] = {
    "recover": Local(
        "gpuyard.recovercmd", "recover_app",
        "Make a new platform-admin token from the server's data dir (no HTTP).",
    ),
}


@dataclass(frozen=True)
class OwnParser:
    """A command whose module parses its own arguments, `--help` included (`gpuyard.entry`
    sends it there before typer is imported): listed here with its short help."""

    module: str
    help: str


OWN_PARSER_COMMANDS: dict[str, OwnParser] = {
    "exec": OwnParser(
        "gpuyard.cli.fastexec",
        "Run a command in a running task's container (gpuyard exec --help).",
    ),
    "port-forward": OwnParser(
        "gpuyard.cli.fastexec",
        "Forward a local TCP port to a port inside a running task (gpuyard port-forward "
        "--help).",
    ),
    "run": OwnParser(
        "gpuyard.cli.fastrun",
        "Run a command in a new interactive job and attach to it, as srun --pty (gpuyard run "
        "--help).",
    ),
    "ssh": OwnParser(
        "gpuyard.cli.fastssh",
        "ssh into a running task's sshd through the platform, with your own key (gpuyard ssh "
        "--help).",
    ),
}


class Delegated(TyperCommand):
    """An `OwnParser` command reached through typer (`gpuyard.cli.full.main`): every
    argument, `--` and `--help` included, goes to its module's `main` untouched."""

    def __init__(self, name: str, own: OwnParser) -> None:
        super().__init__(name=name, help=own.help, add_help_option=False)
        self.module = own.module

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        ctx.meta["gpuyard.argv"] = list(args)
        return []

    def invoke(self, ctx: Context) -> None:
        module = importlib.import_module(self.module)
        raise typer.Exit(module.main([str(self.name), *ctx.meta["gpuyard.argv"]]))


class WithLocalCommands(TyperGroup):
    """A command group of the HTTP client, plus local commands, imported on first use, and
    (at the top) the commands that parse their own arguments."""

    local: dict[str, Local] = LOCAL_COMMANDS
    own: dict[str, OwnParser] = OWN_PARSER_COMMANDS
    listing = False  # True while this group's help lists its commands

    def list_commands(self, ctx: Context) -> list[str]:
        return [*super().list_commands(ctx), *self.local, *self.own]

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        if cmd_name in self.own:
            return Delegated(cmd_name, self.own[cmd_name])
        if cmd_name not in self.local:
            return super().get_command(ctx, cmd_name)
        if self.listing:
            return TyperCommand(name=cmd_name, help=self.local[cmd_name].help)
        return self.local[cmd_name].load(cmd_name)

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        self.listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self.listing = False


class WithLocalAdminCommands(WithLocalCommands):
    """`gpuyard admin`: the HTTP client's admin commands, plus `recover`."""

    local = LOCAL_ADMIN_COMMANDS
    own: dict[str, OwnParser] = {}


app.info.cls = WithLocalCommands
admin_app.info.cls = WithLocalAdminCommands


def main(argv: list[str]) -> int:
    """Run the full command line on `argv`; typer exits with the command's code."""
    app(args=argv, prog_name="gpuyard")
    return 0
