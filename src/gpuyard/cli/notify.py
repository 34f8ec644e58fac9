"""E-mail notifications from the command line (docs/observability.md, E-mail):

    gpuyard notify --email alice@example.com --on failure   # or --on end, --on off
    gpuyard notify                                          # what is set
    gpuyard admin mail set --host smtp.example.com --from gpuyard@example.com \\
        --user relay --password-file /etc/gpuyard/smtp-password
    gpuyard admin mail show                                 # never the password

`notify` sets the caller's own address and wishes (what it does not name stays as it was);
`admin mail` the SMTP relay (platform admins). The password is read from a file (or a prompt
with `--password-prompt`), never from the command line, and is never printed.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from gpuyard.cli.basics import EXIT_USAGE, HTTP_INVALID, print_json
from gpuyard.cli.client import ApiError
from gpuyard.cli.session import Output, Session, api_errors, fail, session_of

mail_app = typer.Typer(help="The SMTP relay job e-mails go through.", no_args_is_help=True)
OutputOpt = Annotated[Output, typer.Option("--output", "-o")]


class On(enum.StrEnum):
    failure = "failure"
    end = "end"
    off = "off"


def notify(
    ctx: typer.Context,
    email: Annotated[str | None, typer.Option(help="Your address (one plain user@host).")] = None,
    on: Annotated[
        On | None, typer.Option("--on", help="Mail on failure, on every end, or off.")
    ] = None,
    output: OutputOpt = Output.table,
) -> None:
    """Be mailed when a job of yours fails or ends; without options, show what is set."""
    session = session_of(ctx)
    with api_errors(session):
        me = session.client.whoami()["name"]
        current = session.client.notifications(me)
        if email is not None or on is not None:
            body = {"email": email or current.get("email"), "notify": str(on or current["notify"])}
            current = _put(session, lambda: session.client.notifications(me, body))
    if output is Output.json:
        print_json(current)
    else:
        session.out.print(Text(f"{current['user']}: {current.get('email') or 'no address'}, "
                               f"mailed on {current['notify']}"))  # fmt: skip


@mail_app.command("set")
def mail_set(
    ctx: typer.Context,
    host: Annotated[str, typer.Option(help="The relay's host name or address.")],
    sender: Annotated[str, typer.Option("--from", help="The mails' From address.")],
    port: Annotated[int, typer.Option(help="The relay's port.")] = 587,
    starttls: Annotated[bool, typer.Option(help="STARTTLS, the certificate checked.")] = True,
    user: Annotated[str | None, typer.Option(help="Log in as this user.")] = None,
    password_file: Annotated[
        Path | None, typer.Option(help="The login's password, from a file.")
    ] = None,
    password_prompt: Annotated[bool, typer.Option(help="Ask for the password.")] = False,
    output: OutputOpt = Output.table,
) -> None:
    """Set the SMTP relay (platform admin); without a password option the one set stays."""
    session = session_of(ctx)
    body: dict[str, Any] = {"host": host, "port": port, "sender": sender,
                            "starttls": starttls, "username": user}  # fmt: skip
    if password_file is not None:
        body["password"] = _read_password(session, password_file)
    elif password_prompt:
        body["password"] = typer.prompt("SMTP password", hide_input=True)
    with api_errors(session):
        shown = _put(session, lambda: session.client.mail_settings(body))
    _show_relay(session, shown, output)


@mail_app.command("show")
def mail_show(ctx: typer.Context, output: OutputOpt = Output.table) -> None:
    """The SMTP relay (platform admin): whether a password is set, never the password."""
    session = session_of(ctx)
    with api_errors(session):
        shown = session.client.mail_settings()
    _show_relay(session, shown, output)


def _read_password(session: Session, path: Path) -> str:
    try:
        return path.read_text().rstrip("\r\n")
    except OSError as e:
        fail(session, f"cannot read the password file {path}: {e.strerror}", EXIT_USAGE)


def _put(session: Session, call: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """A PUT's answer; a field the server refused (422) is exit 2 with its path and sentence."""
    try:
        return call()
    except ApiError as exc:
        if exc.status != HTTP_INVALID:
            raise
        words = "; ".join(f"{e.get('path')}: {e.get('message')}" for e in exc.errors)
        fail(session, words.replace("body.", "--"), EXIT_USAGE)


def _show_relay(session: Session, shown: dict[str, Any], output: Output) -> None:
    if output is Output.json:
        print_json(shown)
        return
    if not shown.get("host"):
        session.out.print("no SMTP relay set: no job e-mails are sent")
        return
    login = f", login {shown['username']}" if shown.get("username") else ""
    secret = " (password set)" if shown.get("passwordSet") else ""
    tls = "STARTTLS" if shown.get("starttls") else "no TLS"
    session.out.print(Text(f"{shown['host']}:{shown['port']} from {shown['sender']}, {tls}"
                           f"{login}{secret}"))  # fmt: skip
