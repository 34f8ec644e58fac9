"""`gpuyard admin registry …`: a tenant's logins to private container registries (platform
admins; docs/images.md, Private registries).

    gpuyard admin registry set vision registry.lan:5000 --username bot --password-stdin \\
        < /etc/gpuyard/registry-password
    gpuyard admin registry set vision ghcr.io --token-stdin < token.txt
    gpuyard admin registry ls vision
    gpuyard admin registry rm vision registry.lan:5000

The password or token is read from stdin (its trailing newline cut, as `docker login
--password-stdin` does), never from the command line, and never printed: no answer of the
server holds it. The tenant's tasks pull their images from that host with this login unless
their job brings its own (OpenPAI `auth`).
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from rich.text import Text

from gpuyard.cli.basics import EXIT_USAGE, HTTP_INVALID, ApiError, print_json
from gpuyard.cli.render_admin import render_registries
from gpuyard.cli.session import Output, Session, api_errors, fail, session_of

registry_app = typer.Typer(
    help="Tenants' logins to private container registries.", no_args_is_help=True
)

Tenant = Annotated[str, typer.Argument(help="The tenant whose tasks pull with the login.")]
Host = Annotated[
    str, typer.Argument(help="The registry's host[:port] (registry.lan:5000, docker.io).")
]
OutputOpt = Annotated[Output, typer.Option("--output", "-o")]


def registry_of(value: str) -> str:
    """The host[:port] of a registry as `docker login` takes it (`https://host/v1/` → `host`):
    the server keeps and matches logins by it (lower case, Docker Hub's aliases as docker.io)."""
    text = value.strip()
    text = text.partition("://")[2] if "://" in text else text
    host = text.partition("/")[0]
    if not host:
        raise typer.BadParameter(f"{value!r} names no registry host", param_hint="HOST")
    return host


def secret_kind(username: str | None, password_stdin: bool, token_stdin: bool) -> str:
    """`password` or `token`: which secret stdin holds (exactly one; a password needs its
    username)."""
    if password_stdin == token_stdin:
        raise typer.BadParameter("give --password-stdin or --token-stdin (one of them)")
    if password_stdin and not username:
        raise typer.BadParameter("--password-stdin needs --username")
    return "password" if password_stdin else "token"


def login_body(username: str | None, kind: str, secret: str) -> dict[str, Any]:
    """The PUT body: `{"username", "password"}` or `{"token"}` (with a username if given)."""
    return {**({"username": username} if username else {}), kind: secret}


def read_secret(session: Session, what: str) -> str:
    """The password or token on stdin, its trailing newline cut; exit 2 if there is none."""
    if sys.stdin.isatty():
        session.err.print(f"the {what}, then Ctrl-D:", style="dim")
    secret = sys.stdin.read().rstrip("\r\n")
    if not secret:
        fail(session, f"no {what} on stdin", EXIT_USAGE)
    return secret


def refused_fields(exc: ApiError) -> str:
    """A 422's fields in the CLI's words (`--username: ...`)."""
    words = [f"{e.get('path')}: {e.get('message')}" for e in exc.errors]
    return "; ".join(words).replace("body.", "--").replace("body: ", "") or exc.detail


@registry_app.command("set")
def registry_set(
    ctx: typer.Context,
    tenant: Tenant,
    host: Host,
    username: Annotated[
        str | None, typer.Option("--username", "-u", help="Log in as this user.")
    ] = None,
    password_stdin: Annotated[
        bool, typer.Option("--password-stdin", help="Read the password from stdin.")
    ] = False,
    token_stdin: Annotated[
        bool, typer.Option("--token-stdin", help="Read a token (instead) from stdin.")
    ] = False,
    output: OutputOpt = Output.table,
) -> None:
    """Set TENANT's login for the registry HOST (or replace it): its tasks pull with it."""
    session = session_of(ctx)
    registry = registry_of(host)
    kind = secret_kind(username, password_stdin, token_stdin)
    body = login_body(username, kind, read_secret(session, kind))
    with api_errors(session):
        try:
            entry = session.client.set_registry(tenant, registry, body)
        except ApiError as exc:
            if exc.status != HTTP_INVALID:
                raise
            fail(session, refused_fields(exc), EXIT_USAGE)
    if output is Output.json:
        print_json(entry)
        return
    session.err.print(Text(f"tenant {tenant} logs in to {entry.get('registry')} "
                           f"as {entry.get('username')}"))  # fmt: skip
    render_registries(session.out, tenant, [entry])


@registry_app.command("ls")
def registry_ls(ctx: typer.Context, tenant: Tenant, output: OutputOpt = Output.table) -> None:
    """The registries TENANT's tasks log in to: host, username, when and by whom set."""
    session = session_of(ctx)
    with api_errors(session):
        data = session.client.registries(tenant)
    if output is Output.json:
        print_json(data)
    else:
        render_registries(session.out, tenant, data.get("registries") or [])


@registry_app.command("rm")
def registry_rm(ctx: typer.Context, tenant: Tenant, host: Host) -> None:
    """Remove TENANT's login for HOST: its tasks pull from there without one."""
    session = session_of(ctx)
    registry = registry_of(host)
    with api_errors(session):
        session.client.remove_registry(tenant, registry)
    session.out.print(Text(f"removed tenant {tenant}'s login for {registry}"))


registry_app.command("list", hidden=True)(registry_ls)  # as `admin tenant list`
registry_app.command("remove", hidden=True)(registry_rm)  # as `admin member remove`
