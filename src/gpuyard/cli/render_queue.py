"""Rich rendering of `gpuyard queue`: per tenant one bar per GPU flavor (guaranteed, used,
borrowed, lent) and its queue as a table (plain dicts in, camelCase keys as in docs/api.md;
missing keys render as "-").

A bar is the flavor's cluster capacity, one cell per GPU (scaled down past `BAR_MAX`
cells), drawn in distinct characters so it reads without colour too:

    █ used within the guarantee   ▓ borrowed (beyond it)   ▒ guaranteed, lent to others
    ░ guaranteed, idle            · the rest of the cluster
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from gpuyard.cli.plaintable import basis_words
from gpuyard.cli.render import plain
from gpuyard.cli.times import NONE, parse_time, relative_time

BAR_MAX = 40
#: (part, character, style), in the order they are drawn
SEGMENTS = (
    ("used", "█", "green"),
    ("borrowed", "▓", "magenta"),
    ("lent", "▒", "yellow"),
    ("idle", "░", "green"),
    ("rest", "·", "dim"),
)
LEGEND = (
    ("█", "used within guarantee"),
    ("▓", "borrowed"),
    ("▒", "lent to others"),
    ("░", "guaranteed, idle"),
    ("·", "rest of cluster"),
)


def _int(value: Any) -> int:
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0


def bar_parts(share: dict[str, Any], capacity: int) -> dict[str, int]:
    """GPU counts of each bar segment; they sum to at least `capacity`."""
    guaranteed, used = _int(share.get("guaranteed")), _int(share.get("used"))
    within = min(used, guaranteed)
    lent = min(_int(share.get("lent")), guaranteed - within)
    parts = {
        "used": within,
        "borrowed": _int(share.get("borrowed")),
        "lent": lent,
        "idle": guaranteed - within - lent,
    }
    parts["rest"] = max(0, capacity - sum(parts.values()))
    return parts


def _scaled(parts: dict[str, int], width: int) -> dict[str, int]:
    total = sum(parts.values())
    if total <= width:
        return parts
    return {k: max(1, round(n * width / total)) if n else 0 for k, n in parts.items()}


def flavor_bar(share: dict[str, Any], capacity: int, width: int = BAR_MAX) -> Text:
    """`█▓▓▒░··` for one tenant's share of one flavor."""
    cells = _scaled(bar_parts(share, capacity), width)
    bar = Text()
    for part, char, style in SEGMENTS:
        bar.append(char * cells[part], style=style)
    return bar


def share_numbers(share: dict[str, Any]) -> Text:
    """`guaranteed 2 · used 3 · borrowed 1 · lent 0`."""
    text = Text()
    for i, key in enumerate(("guaranteed", "used", "borrowed", "lent")):
        if i:
            text.append(" · ", style="dim")
        value = share.get(key)
        style = "magenta" if key == "borrowed" and _int(value) else ""
        text.append(f"{key} {NONE if value is None else value}", style=style)
    return text


def eta_text(value: str | None, now: datetime | None = None) -> Text:
    """An estimated start: `in 12m`, `soon` when it is due, "-" when there is none."""
    when = parse_time(value)
    if when is None:
        return plain(None)
    if (when - (now or datetime.now(UTC))).total_seconds() < 60:
        return Text("soon")
    return Text(relative_time(value, now))


def tenant_header(tenant: dict[str, Any]) -> Text:
    text = Text(str(tenant.get("name", "?")), style="bold")
    text.append(f"  weight {tenant.get('weight', NONE)}  {tenant.get('queuePolicy', NONE)}")
    queued = len(tenant.get("queue") or [])
    text.append(f"  {queued} queued", style="yellow" if queued else "dim")
    return text


def shares_table(tenant: dict[str, Any], capacity: dict[str, int]) -> Table | Text:
    flavors = tenant.get("flavors") or []
    if not flavors:
        return Text("  no GPU quota and no GPUs in use", style="dim")
    table = Table.grid(padding=(0, 2))
    table.add_column(no_wrap=True)
    table.add_column(no_wrap=True)
    table.add_column()
    for share in flavors:
        flavor = str(share.get("flavor", "?"))
        table.add_row(
            Text(f"  {flavor}"), flavor_bar(share, capacity.get(flavor, 0)), share_numbers(share)
        )
    return table


def queue_table(queue: list[dict[str, Any]], now: datetime | None = None) -> Group | Text:
    """The tenant's queue, then a line per estimated start saying what it rests on (a line,
    not a column: the sentence reads at any terminal width)."""
    if not queue:
        return Text("  queue empty", style="dim")
    table = Table(box=None, header_style="bold", pad_edge=False, padding=(0, 1))
    for name in ("  POS", "JOB", "OWNER", "GPUS", "PRIO", "REASON", "STARTS"):
        table.add_column(name, no_wrap=True)
    for job in queue:
        table.add_row(
            Text(f"  {job.get('position') or NONE}"),
            Text.assemble(str(job.get("id", "?")), (f" {job.get('name', '')}", "dim")),
            plain(job.get("owner")),
            plain(job.get("gpus")),
            plain(job.get("priority")),
            Text(str(job.get("pendingCode") or NONE), style="yellow"),
            eta_text(job.get("estimatedStart"), now),
        )
    notes = [
        Text(
            f"  {job.get('id', '?')} starts {eta_text(job.get('estimatedStart'), now)}: "
            f"estimated from {basis}",
            style="dim",
        )
        for job in queue
        if (basis := basis_words(job))
    ]
    return Group(table, *notes)


def cluster_line(cluster: list[dict[str, Any]]) -> Text:
    """`cluster  A100-80GB 3/4 allocated`."""
    text = Text("cluster", style="bold")
    for f in cluster:
        text.append(
            f"  {f.get('flavor', '?')} {f.get('allocated', NONE)}/{f.get('capacity', NONE)}"
        )
        text.append(" allocated", style="dim")
    return text


def legend() -> Text:
    text = Text()
    for i, (char, words) in enumerate(LEGEND):
        text.append("  " if i else "")
        text.append(char, style=next(s for _, c, s in SEGMENTS if c == char))
        text.append(f" {words}", style="dim")
    return text


def render_queue(console: Console, data: dict[str, Any], now: datetime | None = None) -> None:
    """The `gpuyard queue` page: the cluster, a legend, then each tenant's bars and queue."""
    cluster = data.get("cluster") or []
    capacity = {str(f.get("flavor")): _int(f.get("capacity")) for f in cluster}
    tenants = data.get("tenants") or []
    console.print(cluster_line(cluster))
    console.print(legend())
    if not tenants:
        console.print("no tenants", style="dim")
    for tenant in tenants:
        console.print()
        console.print(tenant_header(tenant))
        console.print(shares_table(tenant, capacity))
        console.print(queue_table(tenant.get("queue") or [], now))
