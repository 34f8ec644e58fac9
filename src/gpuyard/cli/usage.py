"""`gpuyard usage`: GPU-hours, CPU-hours, jobs, waits and GPU-hours lost to preemption per
tenant, user or job, against quota and budget (`GET /api/v1/usage`; docs/accounting.md), as
a table, CSV or JSON."""

from __future__ import annotations

import csv
import enum
import sys
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from gpuyard.cli.basics import EXIT_USAGE, HTTP_INVALID, print_json
from gpuyard.cli.client import ApiError
from gpuyard.cli.session import Session, api_errors, fail, session_of


class By(enum.StrEnum):
    tenant = "tenant"
    user = "user"
    job = "job"


class UsageOutput(enum.StrEnum):
    table = "table"
    csv = "csv"
    json = "json"


#: the columns, by group: (heading, the row's field)
KEYS = {
    By.tenant: [("TENANT", "tenant")],
    By.user: [("TENANT", "tenant"), ("USER", "user")],
    By.job: [("TENANT", "tenant"), ("USER", "user"), ("JOB", "job"), ("NAME", "name")],
}
NUMBERS = [
    ("GPU-H", "gpuHours"), ("CPU-H", "cpuHours"), ("JOBS", "jobs"),
    ("AVG WAIT", "avgWaitS"), ("P95 WAIT", "p95WaitS"), ("LOST GPU-H", "lostGpuHours"),
]  # fmt: skip
QUOTA = [("QUOTA GPU-H", "quotaGpuHours"), ("QUOTA %", "quotaUsedPct"), ("BUDGET", "budget")]


def usage(
    ctx: typer.Context,
    by: Annotated[By, typer.Option("--by", help="Group by tenant, user or job.")] = By.tenant,
    since: Annotated[str | None, typer.Option(help="30m, 7d or an ISO time (30 days ago).")] = None,
    until: Annotated[str | None, typer.Option(help="30m, 7d or an ISO time (now).")] = None,
    tenant: Annotated[str | None, typer.Option(help="Only this tenant.")] = None,
    output: Annotated[UsageOutput, typer.Option("--output", "-o")] = UsageOutput.table,
) -> None:
    """GPU-hours, CPU-hours, jobs, waits and preemption losses, against quota and budget."""
    session = session_of(ctx)
    params = {"by": str(by), "since": since, "until": until, "tenant": tenant}
    data = fetch(session, {k: v for k, v in params.items() if v is not None})
    if output is UsageOutput.json:
        print_json(data)
    elif output is UsageOutput.csv:
        write_csv(data, by)
    else:
        session.out.print(usage_table(data, by))
        session.out.print(Text(window_line(data), style="dim"))


def fetch(session: Session, params: dict[str, str]) -> dict[str, Any]:
    """The report; a field the server refused (422) is exit 2 with its path and sentence."""
    with api_errors(session):
        try:
            return session.client.usage(params)
        except ApiError as exc:
            if exc.status != HTTP_INVALID:
                raise
            words = "; ".join(f"{e.get('path')}: {e.get('message')}" for e in exc.errors)
            fail(session, words.replace("query.", "--"), EXIT_USAGE)


def columns(by: By) -> list[tuple[str, str]]:
    return KEYS[by] + NUMBERS + (QUOTA if by is By.tenant else [])


def write_csv(data: dict[str, Any], by: By) -> None:
    """One line a row, the fields by their API names, numbers unrounded."""
    fields = [f for _, f in columns(by) if f != "budget"]
    fields += ["budgetGpuHours", "budgetPeriod", "budgetUsedGpuHours"] if by is By.tenant else []
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(fields)
    for row in data.get("rows") or []:
        writer.writerow(["" if row.get(f) is None else row.get(f) for f in fields])


def usage_table(data: dict[str, Any], by: By) -> Table:
    table = Table(box=None, pad_edge=False, show_footer=bool(data.get("rows")))
    total = data.get("total") or {}
    for number, (heading, field) in enumerate(columns(by)):
        footer = "total" if number == 0 else cell(total, field) if field in _TOTALLED else ""
        table.add_column(
            heading, footer=footer, justify="left" if number < len(KEYS[by]) else "right"
        )
    for row in data.get("rows") or []:
        table.add_row(*(cell(row, f) for _, f in columns(by)))
    return table


_TOTALLED = {"gpuHours", "cpuHours", "jobs", "avgWaitS", "p95WaitS", "lostGpuHours"}


def cell(row: dict[str, Any], field: str) -> str:
    """A value as a person reads it: hours to one decimal, waits as durations, '-' for none."""
    if field == "budget":
        return budget_cell(row)
    value = row.get(field)
    if value is None:
        return "-"
    if field.endswith("WaitS"):
        return duration(float(value))
    if field == "quotaUsedPct":
        return f"{value:.1f}%"
    if isinstance(value, float):
        return f"{value:,.1f}"
    return str(value)


def budget_cell(row: dict[str, Any]) -> str:
    """`12.0/100 this month`, or '-' without a budget."""
    budget = row.get("budgetGpuHours")
    if budget is None:
        return "-"
    used = row.get("budgetUsedGpuHours") or 0.0
    return f"{used:,.1f}/{budget:,.0f} this {row.get('budgetPeriod') or 'period'}"


def duration(seconds: float) -> str:
    """`45s`, `12m`, `3h05m`, `2d04h`."""
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def window_line(data: dict[str, Any]) -> str:
    rolled = data.get("rolledUpTo") or "not yet"
    return (
        f"from {data.get('since')} to {data.get('until')} (whole UTC hours), rolled up to "
        f"{rolled}; LOST GPU-H: whole attempts ended by preemption (checkpoints unknown)"
    )
