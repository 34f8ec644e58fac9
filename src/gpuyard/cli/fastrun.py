"""`gpuyard run [--gpus N] [--image X] [--cpu C] [--memory MB] [--tenant T] [--name NAME]
-- CMD...`: an interactive job, as Slurm's `srun --pty` (docs/interactive.md).

It submits a one-task job with `interactive: true` (its task holds the container open),
attaches to it through the API's exec WebSocket with `attach` (the server waits for the
task to run and says on channel 6 what it waits for: written here on stderr, `waiting for a
GPU: ...`), runs CMD in it on a terminal when stdin is one (else plain pipes; stdin is
forwarded either way) and exits with CMD's exit code. stdout carries CMD's output only. The
server ends the job when the session ends: CMD exited (SUCCEEDED for 0, else FAILED), or
this client went away (Ctrl-C while waiting, killed, cut off: STOPPED), so nothing here has
to clean up. gpuyard's own failures are those of every command: 1 refused, 2 bad usage or
a field the server refused, 3 unreachable, 130 interrupted.

Standard library and wsproto only, as `gpuyard exec` (`fastexec.py`, `tunnel.py`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys

from gpuyard.cli.basics import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    HTTP_FORBIDDEN,
    HTTP_INVALID,
    ApiError,
    ConnectionLost,
    ServerUnreachable,
    error_message,
    login_of,
    unreachable_message,
)
from gpuyard.cli.fast import fail
from gpuyard.cli.fastexec import refused, split_command, without_verb
from gpuyard.cli.plainhttp import PlainClient
from gpuyard.cli.tunnel import interact, open_exec

ROLE = "main"
NOT_A_NAME = re.compile(r"[^A-Za-z0-9_.-]+")
#: where the server puts a refused option in the job it was given
OPTION_OF_PATH = {
    f"taskRoles.{ROLE}.gpuNumber": "--gpus",
    f"taskRoles.{ROLE}.cpuNumber": "--cpu",
    f"taskRoles.{ROLE}.memoryMB": "--memory",
    "image": "--image",
    "tenant": "--tenant",
    "name": "--name",
}
TENANT_HINT = "a job goes to tenant `default` unless --tenant names yours (`gpuyard whoami`)"


def run_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpuyard run",
        description="Run a command in a new interactive job and attach to it, as srun --pty: "
        "a terminal when stdin is one, its exit code as gpuyard's (docs/interactive.md).",
        usage="gpuyard run [--gpus N] [--image X] [--cpu C] [--memory MB] [--tenant T] "
        "[--name NAME] [-T] -- COMMAND [ARG...]",
    )
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--gpus", type=_gpus, help="GPUs: a whole number, or a share like 0.5")
    parser.add_argument("--image", help="the container image (default: the node's root fs)")
    parser.add_argument("--cpu", type=float, help="CPUs (default 1)")
    parser.add_argument("--memory", type=int, metavar="MB", help="memory in MB (default 1024)")
    parser.add_argument("--tenant", help="the tenant to run in (default: default)")
    parser.add_argument("--name", help="the job's name (default: run-COMMAND)")
    parser.add_argument("-T", "--no-tty", action="store_true",
                        help="plain pipes even when stdin is a terminal")
    return parser


def _gpus(text: str) -> int | float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    return int(value) if value.is_integer() else value


def job_document(args: argparse.Namespace, command: list[str]) -> dict[str, object]:
    """The interactive job: one task of role `main`; what is not given is the server's."""
    role: dict[str, object] = {"command": shlex.join(command)}
    asked = (("gpuNumber", args.gpus), ("cpuNumber", args.cpu), ("memoryMB", args.memory))
    role.update({key: value for key, value in asked if value is not None})
    job: dict[str, object] = {"name": args.name or default_name(command), "interactive": True}
    job.update({key: value for key, value in (("image", args.image), ("tenant", args.tenant))
                if value is not None})
    return job | {"taskRoles": {ROLE: role}}


def default_name(command: list[str]) -> str:
    """`run-` and the program's base name, as a job name allows (`run-python3`)."""
    program = NOT_A_NAME.sub("-", os.path.basename(command[0])).strip("-.") or "command"
    return f"run-{program}"[:63]


def submit(url: str, token: str | None, job: dict[str, object]) -> str:
    """POST the job; its id."""
    client = PlainClient(url, token)
    try:
        answer = client.submit_job(json.dumps(job).encode(), "application/json")
    finally:
        client.close()
    return str(answer.get("id"))


class Progress:
    """Writes what the session waits for on stderr, each new sentence once."""

    def __init__(self, job_id: str, gpus: bool) -> None:
        self.job_id = job_id
        self.waiting_for = "a GPU" if gpus else "resources"
        self.said: str | None = None

    def __call__(self, progress: dict[str, object]) -> None:
        reason = progress.get("reason")
        if not reason or reason == self.said:
            return  # the scheduler has not looked yet, or nothing new
        self.said = str(reason)
        if progress.get("state") == "QUEUED":
            line = f"job {self.job_id} waiting for {self.waiting_for}: {reason}"
        else:
            line = f"job {self.job_id} starting: {reason}"
        sys.stderr.write(f"gpuyard run: {line}\n")
        sys.stderr.flush()


def run(argv: list[str]) -> int:
    head, command = split_command(argv)
    args = run_parser().parse_args(without_verb(head, "run"))
    if not command:
        return fail("run needs a command after --, e.g. gpuyard run --gpus 1 -- bash", EXIT_USAGE)
    url, token = login_of(args.url)
    job = job_document(args, command)
    try:
        job_id = submit(url, token, job)
    except ApiError as exc:
        return submit_refused(exc, args.tenant is not None)
    tty = not args.no_tty and os.isatty(sys.stdin.fileno())
    ws = open_exec(url, token, job_id, None, command, tty, attach=True)
    return interact(ws, tty, True, Progress(job_id, bool(args.gpus)))


def submit_refused(exc: ApiError, tenant_given: bool) -> int:
    if exc.status == HTTP_INVALID:
        lines = [f"gpuyard run: the job was refused: {exc.detail}"]
        for e in exc.errors:
            path = str(e.get("path") or "")
            lines.append(f"  {OPTION_OF_PATH.get(path, path)}: {e.get('message')}")
        return fail("\n".join(lines), EXIT_USAGE)
    message = error_message(exc)
    if exc.status == HTTP_FORBIDDEN and not tenant_given:
        message += f"\n  {TENANT_HINT}"
    return fail(message)


def main(argv: list[str]) -> int:
    try:
        return run(argv)
    except ServerUnreachable as exc:
        return fail(unreachable_message(exc.url), EXIT_UNREACHABLE)
    except ConnectionLost as exc:
        return fail(str(exc), EXIT_UNREACHABLE)
    except ApiError as exc:
        return fail(refused(exc), EXIT_USAGE if exc.status == HTTP_INVALID else EXIT_FAILED)
    except KeyboardInterrupt:  # the socket closes as this exits: the server stops the job
        return EXIT_INTERRUPTED
