"""The `gpuyard show ARRAY` page: a job array's summary, then a row per child."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from gpuyard.cli.jobtree import counts_text
from gpuyard.cli.render import plain, state_text, when_summary


def array_header(array: dict[str, Any]) -> Panel:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row("name", plain(array.get("name")))
    grid.add_row("tenant", plain(array.get("tenant")))
    grid.add_row("state", state_text(array.get("state")))
    grid.add_row("children", Text(counts_text(array)))
    limit = array.get("maxRunning")
    grid.add_row("at once", Text(f"at most {limit}" if limit else "no limit"))
    grid.add_row("submitted", Text(when_summary(array.get("submittedAt"))))
    if array.get("stopRequested"):
        grid.add_row("stop asked", plain(array["stopRequested"]))
    title = Text.assemble("job array ", (str(array.get("id", "?")), "bold"))
    return Panel(grid, title=title, title_align="left", expand=False)


def render_array(console: Console, array: dict[str, Any]) -> None:
    console.print(array_header(array))
    table = Table(title="children", title_justify="left", title_style="bold", header_style="bold")
    for name in ("INDEX", "JOB", "STATE", "REASON"):
        table.add_column(name, no_wrap=name != "REASON")
    for child in array.get("children") or []:
        table.add_row(
            plain(child.get("index")),
            plain(child.get("id")),
            state_text(child.get("state")),
            plain(child.get("reason")),
        )
    console.print(table)
