"""The `gpuyard` command: a dispatcher that imports only what the command needs.

`gpuyard submit FILE` (without `--wait`) and `gpuyard jobs` go to their fast modules,
`gpuyard.cli.fastsubmit` and `gpuyard.cli.fastjobs`, and `submit --tenant` to
`gpuyard.cli.fasttenant` (standard library only, and PyYAML for `--tenant`: tens of
milliseconds a call); `exec` and `port-forward` to `gpuyard.cli.fastexec` (with wsproto),
`run` to `gpuyard.cli.fastrun`, and `ssh` (with its ProxyCommand, `ssh-proxy`) to
`gpuyard.cli.fastssh`, help included; everything else, `--help` included, goes
to the full typer command line, `gpuyard.cli.full`, which in turn imports the server, image
and simulator commands only when one of them runs. The module is picked by name and imported
with importlib, so starting `gpuyard` imports neither path until it knows which it needs
(docs/cli.md).
"""

from __future__ import annotations

import importlib
import sys

FULL = "gpuyard.cli.full"
FAST = {"submit": "gpuyard.cli.fastsubmit", "jobs": "gpuyard.cli.fastjobs"}
#: a fast command with this option has a module of its own (`submit --tenant` reads YAML)
FAST_WITH_OPTION = {("submit", "--tenant"): "gpuyard.cli.fasttenant"}
#: commands whose module answers everything, its own `--help` included; what follows `--`
#: is the task's command, never gpuyard's options (`gpuyard.cli.fastexec`: docs/exec.md)
OWN_PARSER = {
    "exec": "gpuyard.cli.fastexec",
    "port-forward": "gpuyard.cli.fastexec",
    "run": "gpuyard.cli.fastrun",  # docs/interactive.md
    "ssh": "gpuyard.cli.fastssh",  # docs/exec.md, *gpuyard ssh*
    "ssh-proxy": "gpuyard.cli.fastssh",  # gpuyard ssh's ProxyCommand (hidden)
}
#: options of the fast commands that only the full command line has
FULL_ONLY_OPTIONS = frozenset({"--wait", "--help", "-h"})
GLOBAL_OPTIONS_WITH_VALUE = frozenset({"--url"})


def command_of(argv: list[str]) -> str | None:
    """The command word: the first argument past the global options (`--url URL`)."""
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in GLOBAL_OPTIONS_WITH_VALUE:
            skip = True
        elif not arg.startswith("-"):
            return arg
        elif arg.split("=", 1)[0] not in GLOBAL_OPTIONS_WITH_VALUE:
            return None  # an option the fast path does not know: let the full one answer
    return None


def route(argv: list[str]) -> str:
    """Which module runs this command line."""
    command = command_of(argv) or ""
    if command in OWN_PARSER:
        return OWN_PARSER[command]
    if command not in FAST or FULL_ONLY_OPTIONS.intersection(argv):
        return FULL
    options = {arg.split("=", 1)[0] for arg in argv if arg.startswith("--")}
    with_option = [m for (c, o), m in FAST_WITH_OPTION.items() if c == command and o in options]
    return with_option[0] if with_option else FAST[command]


def main() -> None:
    argv = sys.argv[1:]
    sys.exit(importlib.import_module(route(argv)).main(argv))


def __getattr__(name: str) -> object:
    """`gpuyard.entry.app`: the full typer app, for tests that drive it with CliRunner (they
    used to import it from here); imported on that first use only, as `main` does."""
    if name == "app":
        return importlib.import_module(FULL).app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
