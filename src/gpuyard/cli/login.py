"""`gpuyard login` (check a token with the server, then save URL and token for later
commands) and `gpuyard whoami`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from gpuyard.cli.basics import EXIT_USAGE, HTTP_UNAUTHORIZED, normalize_url, print_json, save_config
from gpuyard.cli.client import ApiError
from gpuyard.cli.render_admin import render_whoami
from gpuyard.cli.session import Output, Session, api_errors, fail, session_of


def read_token(token: str | None, token_file: Path | None) -> str | None:
    """The token from `--token` or the first line of `--token-file`."""
    if token_file is not None:
        lines = token_file.read_text().strip().splitlines()
        return lines[0].strip() if lines else None
    return token.strip() if token else None


def login(
    ctx: typer.Context,
    url: Annotated[
        str | None, typer.Option("--url", help="Server URL (default: the current one).")
    ] = None,
    token: Annotated[
        str | None, typer.Option("--token", help="The API token (visible in `ps`: prefer a file).")
    ] = None,
    token_file: Annotated[
        Path | None,
        typer.Option(
            "--token-file",
            exists=True,
            dir_okay=False,
            readable=True,
            help="A file whose first line is the API token.",
        ),
    ] = None,
) -> None:
    """Check a token with the server and save it with the URL for later commands."""
    session = session_of(ctx)
    if token is not None and token_file is not None:
        fail(session, "give --token or --token-file, not both", EXIT_USAGE)
    secret = read_token(token, token_file) or typer.prompt("API token", hide_input=True)
    server = normalize_url(url) if url else session.url
    me = check_login(session, server, secret)
    path = save_config(server, secret)
    session.err.print(Text(f"saved the login to {path}", style="dim"))
    session.out.print(
        Text.assemble("logged in to ", (server, "bold"), " as ", (str(me.get("name")), "bold"))
    )


def check_login(session: Session, server: str, secret: str) -> dict:
    """Ask the server who this token is; a refused token is a clear error."""
    probe = Session(url=server, token=secret, out=session.out, err=session.err)
    try:
        with api_errors(probe):
            try:
                return probe.client.whoami()
            except ApiError as exc:
                if exc.status != HTTP_UNAUTHORIZED:
                    raise
                fail(probe, f"the server at {server} refused this token: {exc.detail}")
    finally:
        probe.close()


def whoami(
    ctx: typer.Context,
    output: Annotated[Output, typer.Option("--output", "-o")] = Output.table,
) -> None:
    """Who the server says you are: your platform role and your tenants."""
    session = session_of(ctx)
    with api_errors(session):
        me = session.client.whoami()
    if output is Output.json:
        print_json(me)
    else:
        render_whoami(session.out, me, session.url)
