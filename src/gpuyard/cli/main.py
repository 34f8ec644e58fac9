"""The `gpuyard` commands: submit, jobs, show, logs, nodes, queue; cancel, resubmit, hold,
release and priority (`gpuyard.cli.control`); usage (`gpuyard.cli.usage`); notify
(`gpuyard.cli.notify`); login and whoami (`gpuyard.cli.login`); the `admin` group
(`gpuyard.cli.admin`, its `mail` commands in `gpuyard.cli.notify`).

The app talks to the server over HTTP only (`ApiClient`). The server URL comes from
`--url`, `GPUYARD_URL` or the saved login; the token from `GPUYARD_TOKEN` or the saved login
(`gpuyard.cli.session` says which wins).

Exit codes: 0 ok; 1 the server said no (unknown job, already ended, other HTTP errors) or
a waited-for job did not succeed; 2 bad usage or a spec the server rejected (422);
3 the server cannot be reached; 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import os
import re
import sys
from contextlib import closing
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from gpuyard.cli.admin import admin_app
from gpuyard.cli.basics import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    HTTP_FORBIDDEN,
    HTTP_INVALID,
    error_message,
    load_config,
    more_jobs_hint,
    normalize_url,
    print_json,
    resolve_login,
    submit_error_message,
    unreachable_message,
)
from gpuyard.cli.client import ApiError
from gpuyard.cli.control import COMMANDS, parse_states, priority
from gpuyard.cli.follow import JobWatcher
from gpuyard.cli.jobtree import job_tree
from gpuyard.cli.login import login, whoami
from gpuyard.cli.notify import notify
from gpuyard.cli.render import (
    final_status,
    render_job,
    render_jobs,
    render_nodes,
    render_spec_errors,
    render_submitted,
)
from gpuyard.cli.render_array import render_array
from gpuyard.cli.render_queue import render_queue
from gpuyard.cli.session import Output, Session, api_errors, fail, session_of
from gpuyard.cli.tenantflag import with_tenant
from gpuyard.cli.usage import usage

__all__ = [
    "EXIT_UNREACHABLE",
    "app",
    "error_message",
    "normalize_url",
    "parse_states",
    "parse_task",
    "unreachable_message",
]

TASK_REF = re.compile(r"^(?P<role>[^/\s]+)(?:/(?P<index>\d+))?$")

app = typer.Typer(
    name="gpuyard",
    help="gpuyard: submit and watch deep-learning jobs on a shared GPU cluster.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)
app.add_typer(admin_app, name="admin")
app.command()(login)
app.command()(whoami)


# -- pure helpers (tested directly) ----------------------------------------------------


def parse_task(value: str | None) -> str | None:
    """`--task ROLE/INDEX` (or just `ROLE`, meaning index 0) → `role/index`."""
    if value is None:
        return None
    match = TASK_REF.match(value.strip())
    if not match:
        raise typer.BadParameter(f"{value!r} is not ROLE/INDEX (for example worker/0)")
    return f"{match['role']}/{int(match['index'] or 0)}"


# -- commands --------------------------------------------------------------------------


@app.callback()
def main(
    ctx: typer.Context,
    url: Annotated[
        str | None,
        typer.Option(
            "--url",
            envvar="GPUYARD_URL",
            help="Server URL (default: the one saved by `gpuyard login`, else "
            "http://127.0.0.1:8080).",
        ),
    ] = None,
) -> None:
    """gpuyard: submit and watch deep-learning jobs on a shared GPU cluster."""
    server, token = resolve_login(url, os.environ.get("GPUYARD_TOKEN"), load_config())
    session = Session(url=server, token=token)
    ctx.obj = session
    ctx.call_on_close(session.close)


@app.command()
def submit(
    ctx: typer.Context,
    file: Annotated[
        Path,
        typer.Argument(exists=True, dir_okay=False, readable=True, help="Job spec (YAML)."),
    ],
    wait: Annotated[
        bool, typer.Option("--wait", help="Wait for the job, streaming its logs.")
    ] = False,
    tenant: Annotated[
        str | None,
        typer.Option(
            "--tenant",
            help="Submit to this tenant (as `tenant:` in the spec; default: the spec's, else "
            "`default`).",
        ),
    ] = None,
) -> None:
    """Submit a job spec; prints the new job's id."""
    session = session_of(ctx)
    spec, content_type = spec_to_send(session, file, tenant)
    with api_errors(session):
        try:
            job = session.client.submit_job(spec, content_type)
        except ApiError as exc:
            if exc.status == HTTP_FORBIDDEN:
                fail(session, submit_error_message(exc, tenant is not None))
            if exc.status != HTTP_INVALID:
                raise
            render_spec_errors(session.err, exc.detail, exc.errors)
            raise typer.Exit(EXIT_USAGE) from None
    session.err.print(Text(f"submitted job {job.get('name', '')!r} ({job.get('state')})"))
    session.out.print(Text(str(job.get("id"))))
    if not wait:
        render_submitted(session.err, job)
        return
    raise typer.Exit(wait_for(session, str(job.get("id"))))


def spec_to_send(session: Session, file: Path, tenant: str | None) -> tuple[bytes, str]:
    """The spec's bytes and content type; with `--tenant`, as JSON naming that tenant."""
    if tenant is None:
        return file.read_bytes(), "application/yaml"
    try:
        return with_tenant(file.read_bytes(), tenant), "application/json"
    except ValueError as exc:
        fail(session, f"error: {exc}", EXIT_USAGE)


def wait_for(session: Session, job_id: str) -> int:
    """Follow a job to its end; the exit code says whether it succeeded."""
    watcher = JobWatcher(session.client, job_id, sys.stdout, session.err)
    with api_errors(session, job_id):
        try:
            job = watcher.run()
        except KeyboardInterrupt:
            session.err.print(
                Text(
                    f"\nstopped waiting; job {job_id} keeps running "
                    f"(gpuyard show {job_id}, gpuyard cancel {job_id})",
                    style="yellow",
                )
            )
            return EXIT_INTERRUPTED
    session.err.print(final_status(job))
    return EXIT_OK if job.get("state") == "SUCCEEDED" else EXIT_FAILED


@app.command()
def jobs(
    ctx: typer.Context,
    state: Annotated[
        list[str] | None,
        typer.Option(
            "--state", help="Only jobs in this state (repeatable).", callback=parse_states
        ),
    ] = None,
    tenant: Annotated[str | None, typer.Option("--tenant", help="Only this tenant's jobs.")] = None,
    user: Annotated[str | None, typer.Option("--user", help="Only this owner's jobs.")] = None,
    name: Annotated[
        str | None, typer.Option("--name", help="Only names matching a glob (* ?, any case).")
    ] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="Submitted since: 2h, 7d or an ISO time.")
    ] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="At most N jobs.")] = None,
    cursor: Annotated[
        str | None, typer.Option("--cursor", help="The next page (said below the last one).")
    ] = None,
    output: Annotated[Output, typer.Option("--output", "-o")] = Output.table,
    expand: Annotated[
        bool, typer.Option("--expand", help="A job array's children under it, not a count.")
    ] = False,
) -> None:
    """List jobs, newest first, a page at a time (a job array as one row)."""
    session = session_of(ctx)
    filters = {"user": user, "name": name, "since": since, "cursor": cursor}
    with api_errors(session):
        data = session.client.list_jobs(state, tenant, limit, filters)
    if output is Output.json:
        print_json(data)
        return
    render_jobs(session.out, job_tree(data.get("jobs") or [], data.get("arrays"), expand))
    if hint := more_jobs_hint(data.get("nextCursor")):
        session.err.print(Text(hint))


@app.command()
def show(
    ctx: typer.Context,
    job_id: Annotated[str, typer.Argument(help="Job id.")],
    output: Annotated[Output, typer.Option("--output", "-o")] = Output.table,
) -> None:
    """Show one job (its state, tasks and events) or a job array (its children)."""
    session = session_of(ctx)
    with api_errors(session, job_id):
        job = session.client.get_job_or_array(job_id)
    if output is Output.json:
        print_json(job)
    elif "children" in job:
        render_array(session.out, job)
    else:
        render_job(session.out, job)


@app.command()
def logs(
    ctx: typer.Context,
    job_id: Annotated[str, typer.Argument(help="Job id.")],
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep streaming until the task ends.")
    ] = False,
    task: Annotated[
        str | None,
        typer.Option(
            "--task",
            metavar="ROLE/INDEX",
            callback=parse_task,
            help="Task (default: the first task).",
        ),
    ] = None,
    attempt: Annotated[
        int | None, typer.Option("--attempt", min=0, help="Attempt (default: the latest).")
    ] = None,
    tail: Annotated[int | None, typer.Option("--tail", min=0, help="Last N lines.")] = None,
) -> None:
    """Print (or follow) a task's logs."""
    session = session_of(ctx)
    with api_errors(session, job_id if task is None and attempt is None else None):
        stream = session.client.stream_logs(
            job_id, task=task, attempt=attempt, tail=tail, follow=follow
        )
        try:
            with closing(stream):
                for chunk in stream:
                    sys.stdout.write(chunk)
                    sys.stdout.flush()
        except KeyboardInterrupt:
            raise typer.Exit(EXIT_INTERRUPTED) from None


@app.command()
def nodes(
    ctx: typer.Context,
    output: Annotated[Output, typer.Option("--output", "-o")] = Output.table,
) -> None:
    """List nodes and their GPUs."""
    session = session_of(ctx)
    with api_errors(session):
        data = session.client.nodes()
    if output is Output.json:
        print_json(data)
    else:
        render_nodes(session.out, data.get("nodes") or [])


@app.command()
def queue(
    ctx: typer.Context,
    output: Annotated[Output, typer.Option("--output", "-o")] = Output.table,
) -> None:
    """Each tenant's GPUs (guaranteed, used, borrowed, lent) as bars, and its queue."""
    session = session_of(ctx)
    with api_errors(session):
        data = session.client.queue()
    if output is Output.json:
        print_json(data)
    else:
        render_queue(session.out, data)


# after submit: cancel (one or many), resubmit, hold, release, priority (gpuyard.cli.control)
for _name, _command in COMMANDS.items():
    app.command(_name)(_command)
# `gpuyard priority JOB -5`: a negative N is the number, not an unknown option
app.command(context_settings={"ignore_unknown_options": True})(priority)
app.command()(usage)  # accounting (gpuyard.cli.usage)
app.command()(notify)  # job e-mails (gpuyard.cli.notify)
