"""An OpenPAI task role's shell script, rendered as OpenPAI runs it.

OpenPAI (rest-server `protocolRender`, kube-runtime `runtime`) does this for a task:

1. the role's `commands`, with the active deployment's `preCommands` before them and its
   `postCommands` after them, each trimmed, are joined with ` && ` into one entrypoint; the
   first that fails ends the chain with its exit code (post commands run only if all before
   succeeded);
2. the entrypoint runs in bash with `errexit` and `pipefail`;
3. runtime plugins (`cmd`) and the role's `prerequisites` with `cmd` callbacks run their
   `taskStarts` / `preCommands` lines before the entrypoint, in order, and their
   `taskSucceeds` / `postCommands` lines after it succeeds, in reverse order, each as a
   script of its own (a failing line fails the task with its code, unless the plugin's
   `failurePolicy` is `ignore`).

Here the whole is one POSIX `sh` script (`/bin/sh -c`): `set -e`, `pipefail` where the shell
has it, each hook and the entrypoint in a subshell of its own (a hook's `cd` or `export` does
not leak into the commands, as OpenPAI's separate scripts do not).
"""

from __future__ import annotations

from dataclasses import dataclass

HEADER = ("set -e", "(set -o pipefail) 2>/dev/null && set -o pipefail")


@dataclass(frozen=True, slots=True)
class Hook:
    """Lines run before (`taskStarts`) or after (`taskSucceeds`) a role's commands."""

    source: str  # the OpenPAI path it comes from, written as a comment in the script
    lines: tuple[str, ...]
    ignore_failures: bool = False


def entrypoint(parts: list[str]) -> str:
    """OpenPAI's entrypoint: each command trimmed, joined with ` && `, the whole trimmed."""
    return " && ".join(part.strip() for part in parts).strip()


def _block(hook: Hook) -> list[str]:
    if hook.ignore_failures:
        return [f"# {hook.source} (failurePolicy: ignore)", "(", "set +e", *hook.lines, ") || true"]
    return [f"# {hook.source}", "(", *hook.lines, ")"]


def script(entry: str, before: list[Hook], after: list[Hook]) -> str:
    """The task's script: the header, the `before` hooks, the entrypoint, the `after` hooks
    (already in the order they run)."""
    if not before and not after:
        return "\n".join([*HEADER, entry])
    lines = list(HEADER)
    for hook in before:
        lines += _block(hook)
    lines += ["(", entry, ")"]
    for hook in after:
        lines += _block(hook)
    return "\n".join(lines)
