"""After-submit control from the command line: `cancel` (one job, or every job a filter
matches, with a count and a confirmation), `resubmit JOB --set path=value`, `hold`,
`release` and `priority JOB N` (docs/cli.md). Each is one call of the REST API."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
import yaml
from rich.text import Text

from gpuyard.cli.basics import (
    EXIT_FAILED,
    EXIT_USAGE,
    HTTP_CONFLICT,
    HTTP_INVALID,
    HTTP_NOT_FOUND,
    check_states,
)
from gpuyard.cli.client import ApiError
from gpuyard.cli.render import render_spec_errors, render_submitted
from gpuyard.cli.session import Session, api_errors, fail, session_of

MAX_LISTED = 20  # jobs named one a line before the rest are counted

JobId = Annotated[str, typer.Argument(help="Job id.")]


def parse_states(values: list[str] | None) -> list[str] | None:
    """`--state running` → `RUNNING`; unknown states are a usage error."""
    if not values:
        return values
    try:
        return check_states(values)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


# -- cancel ----------------------------------------------------------------------------


def cancel(
    ctx: typer.Context,
    job_ids: Annotated[
        list[str] | None, typer.Argument(help="Job ids.", show_default=False)
    ] = None,
    user: Annotated[str | None, typer.Option("--user", help="Jobs of this owner.")] = None,
    tenant: Annotated[str | None, typer.Option("--tenant", help="Jobs of this tenant.")] = None,
    state: Annotated[
        list[str] | None,
        typer.Option("--state", help="Jobs in this state (repeatable).", callback=parse_states),
    ] = None,
    name: Annotated[str | None, typer.Option("--name", help="Names matching a glob (* ?).")] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="Submitted since: 2h, 7d, ISO.")
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Cancel a job, or every job the filters match (a count and a confirmation first,
    unless --yes); exit 1 when any was refused."""
    session = session_of(ctx)
    filters = {"user": user, "tenant": tenant, "state": state, "name": name, "since": since}
    if len(job_ids or []) == 1 and not any(filters.values()):
        cancel_one(session, (job_ids or [])[0])
        return
    body: dict[str, Any] = {k: v for k, v in filters.items() if v}
    if job_ids:
        body["ids"] = job_ids
    if not body:
        fail(
            session,
            "name a job, or filters (--user, --tenant, --state, --name, --since)",
            EXIT_USAGE,
        )
    raise typer.Exit(cancel_many(session, body, yes))


def cancel_one(session: Session, job_id: str) -> None:
    with api_errors(session, job_id):
        try:
            result = session.client.cancel_job(job_id)
        except ApiError as exc:
            if exc.status == HTTP_NOT_FOUND:  # a job array? its children are cancelled
                cancel_array(session, job_id, exc)
                return
            if exc.status != HTTP_CONFLICT:
                raise
            fail(session, f"job {job_id} already ended; nothing to cancel")
    session.out.print(
        Text.assemble(f"cancelling job {job_id}: state ", (str(result.get("state")), "bold"))
    )


def cancel_array(session: Session, array_id: str, not_a_job: ApiError) -> None:
    """Cancel a job array's children; the job's 404 stands if it is no array either."""
    try:
        result = session.client.cancel_array(array_id)
    except ApiError as exc:
        raise (not_a_job if exc.status == HTTP_NOT_FOUND else exc) from None
    session.out.print(
        Text.assemble(
            f"cancelling job array {array_id} ({result.get('cancelled')} jobs): state ",
            (str(result.get("state")), "bold"),
        )
    )


def cancel_many(session: Session, body: dict[str, Any], yes: bool) -> int:
    """A dry run, the count, a confirmation, then the cancel of exactly the jobs shown."""
    with api_errors(session):
        dry = session.client.cancel_jobs(body | {"dryRun": True})
    chosen = list(dry.get("cancelled") or [])
    show_outcome(session, dry, dry_run=True)
    if not chosen:
        return EXIT_FAILED if dry.get("refused") else 0
    if not yes:
        confirm(session, len(chosen))
    with api_errors(session):
        done = session.client.cancel_jobs(body | {"ids": chosen})
    show_outcome(session, done, dry_run=False)
    return EXIT_FAILED if dry.get("refused") or done.get("refused") else 0


def interactive() -> bool:
    """Whether a person can answer the confirmation (stdin is a terminal)."""
    return sys.stdin.isatty()


def confirm(session: Session, count: int) -> None:
    if not interactive():
        fail(session, "not a terminal: add --yes to cancel without a confirmation", EXIT_USAGE)
    if not typer.confirm(f"cancel {count} job{'s' if count != 1 else ''}?", default=False):
        fail(session, "nothing cancelled")


def show_outcome(session: Session, result: dict[str, Any], dry_run: bool) -> None:
    """`would cancel 3 of 5 matching jobs` (or `cancelling 3 jobs`), their ids, then each
    refusal and why."""
    cancelled = result.get("cancelled") or []
    refused = result.get("refused") or []
    n = len(cancelled)
    if dry_run:
        words = f"would cancel {n} of {result.get('matched', n + len(refused))} matching jobs"
    else:
        words = f"cancelling {n} job{'s' if n != 1 else ''}"
    session.out.print(Text(words))
    for job_id in cancelled[:MAX_LISTED]:
        session.out.print(Text(f"  {job_id}"))
    if len(cancelled) > MAX_LISTED:
        session.out.print(Text(f"  … and {len(cancelled) - MAX_LISTED} more"))
    for r in refused:
        session.err.print(Text(f"refused {r.get('id')} ({r.get('name')}): {r.get('reason')}",
                               style="yellow"), soft_wrap=True)  # fmt: skip
    if result.get("more"):
        session.err.print(Text("more jobs matched than one call takes: run it again"))


# -- resubmit ----------------------------------------------------------------------------


def parse_sets(values: list[str] | None) -> dict[str, Any]:
    """`path=value` each (the value read as YAML: 2 is a number, true a bool, [a, b] a list)."""
    sets: dict[str, Any] = {}
    for item in values or []:
        path, eq, text = item.partition("=")
        if not eq or not path.strip():
            raise typer.BadParameter(f"{item!r} is not path=value (taskRoles.worker.gpuNumber=2)")
        try:
            value = yaml.safe_load(text) if text.strip() else text
        except yaml.YAMLError:
            value = text
        sets[path.strip()] = value
    return sets


def resubmit(
    ctx: typer.Context,
    job_id: JobId,
    sets: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            metavar="PATH=VALUE",
            help="Change a field of the original document by its dotted path (repeatable).",
        ),
    ] = None,  # fmt: skip
) -> None:
    """Submit a job's original document again, as you, with --set changes; prints the new id."""
    session = session_of(ctx)
    changes = parse_sets(sets)
    with api_errors(session, job_id):
        try:
            job = session.client.resubmit_job(job_id, changes)
        except ApiError as exc:
            if exc.status != HTTP_INVALID:
                raise
            render_spec_errors(session.err, exc.detail, exc.errors)
            raise typer.Exit(EXIT_USAGE) from None
    session.err.print(
        Text(f"resubmitted job {job_id} as {job.get('name', '')!r} ({job.get('state')})")
    )
    session.out.print(Text(str(job.get("id"))))
    render_submitted(session.err, job)


# -- hold, release, priority -------------------------------------------------------------


def hold(ctx: typer.Context, job_id: JobId) -> None:
    """Hold a queued job: it keeps its place in the queue but does not start until released."""
    job = _act(ctx, job_id, "hold")
    _said(ctx, f"job {job_id} held by {job.get('heldBy')}: it starts only after "
               f"`gpuyard release {job_id}`")  # fmt: skip


def release(ctx: typer.Context, job_id: JobId) -> None:
    """Release a held job: it may be scheduled again, from the place it kept."""
    _act(ctx, job_id, "release")
    _said(ctx, f"job {job_id} released")


def priority(
    ctx: typer.Context,
    job_id: JobId,
    value: Annotated[int, typer.Argument(metavar="N", help="-1000 to 1000; higher goes first.")],
) -> None:
    """Change a job's priority within its tenant's queue (its owner or an admin)."""
    job = _act(ctx, job_id, "priority", {"priority": value})
    _said(ctx, f"job {job_id}: priority {job.get('priority')}")


def _act(
    ctx: typer.Context, job_id: str, action: str, body: dict[str, Any] | None = None
) -> dict[str, Any]:
    session = session_of(ctx)
    with api_errors(session, job_id):
        try:
            return session.client.job_action(job_id, action, body)
        except ApiError as exc:
            if exc.status != HTTP_INVALID:
                raise
            fail(session, "; ".join(f"{e.get('path')}: {e.get('message')}" for e in exc.errors),
                 EXIT_USAGE)  # fmt: skip


def _said(ctx: typer.Context, words: str) -> None:
    session_of(ctx).out.print(Text(words))


#: for `gpuyard.cli.main`: name → command; `priority` takes a negative N as a number
COMMANDS = {"cancel": cancel, "resubmit": resubmit, "hold": hold, "release": release}
