"""Rich rendering of API answers for people.

Every function takes plain dicts shaped as in docs/api.md (camelCase keys) and a
`rich.console.Console`, so they can be tested with `Console(record=True)`. Text that comes
from the server is always wrapped in `Text` (never parsed as markup). Missing keys render
as "-" rather than failing: the CLI must not crash on a field the server left out.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from gpuyard.cli.basics import FINAL_STATES
from gpuyard.cli.plaintable import attempt_cell
from gpuyard.cli.times import NONE, absolute_time, relative_time

STATE_STYLES = {
    "QUEUED": "yellow",
    "SCHEDULED": "cyan",
    "RUNNING": "bold blue",
    "SUCCEEDED": "bold green",
    "FAILED": "bold red",
    "STOPPED": "magenta",
    "PENDING": "dim",
    "STARTING": "cyan",
}

OPP = "OPP"
OPP_RISK = "may be preempted when the lender reclaims them"
OPP_MEANS = f"opportunistic, runs on GPUs borrowed beyond its tenant's guarantee; {OPP_RISK}"
NO_ESTIMATE = "neither the running jobs' maxRuntime nor their learned run times free enough"


# -- small formatters ------------------------------------------------------------------


def state_text(state: str | None) -> Text:
    """A job or task state, coloured."""
    if not state:
        return Text(NONE, style="dim")
    return Text(state, style=STATE_STYLES.get(state, ""))


def plain(value: Any) -> Text:
    """Any value as literal text ("-" for None or empty)."""
    if value is None or value == "":
        return Text(NONE, style="dim")
    return Text(str(value))


def format_cpu(cores: Any) -> str:
    try:
        return f"{float(cores):g}"
    except (TypeError, ValueError):
        return NONE


def format_mb(mb: Any) -> str:
    """Megabytes for people: `512 MiB`, `80 GiB`, `1.5 GiB`."""
    try:
        value = float(mb)
    except (TypeError, ValueError):
        return NONE
    if value < 1024:
        return f"{value:g} MiB"
    return f"{value / 1024:.1f}".removesuffix(".0") + " GiB"


def format_task_gpus(gpus: list[dict[str, Any]] | None, shared_mb: int = 0) -> Text:
    """A task's GPUs: `0,1 H100`, `2 A100-80GB shared 20 GiB` for a share of one GPU, with a
    clear `(fake)` when any of them is fake."""
    if not gpus:
        return Text(NONE, style="dim")
    indices = ",".join(str(g.get("index", "?")) for g in gpus)
    types = "/".join(dict.fromkeys(str(g.get("type") or "GPU") for g in gpus))
    text = Text(f"{indices} {types}")
    if shared_mb:
        text.append(f" shared {format_mb(shared_mb)}", style="cyan")
    if any(g.get("fake") for g in gpus):
        text.append(" (fake)", style="bold magenta")
    return text


def job_state(job: dict[str, Any]) -> Text:
    """The state, with `OPP` when the job runs on borrowed GPUs."""
    text = state_text(job.get("state"))
    if job.get("opportunistic"):
        text.append(f" {OPP}", style="bold magenta")
    return text


def borrowed_text(borrowed: list[dict[str, Any]] | None) -> str:
    """`2 A100-80GB GPUs, 1 H100 GPU`."""
    parts = [
        f"{b.get('gpus')} {b.get('flavor')} GPU{'s' if b.get('gpus') != 1 else ''}"
        for b in borrowed or []
    ]
    return ", ".join(parts) or "CPU or memory"


def kind_text(job: dict[str, Any]) -> Text:
    """Guaranteed, or opportunistic and what it borrows."""
    if not job.get("opportunistic"):
        return Text("guaranteed (within its tenant's quota)")
    text = Text("opportunistic", style="bold magenta")
    text.append(f": borrows {borrowed_text(job.get('borrowed'))}; {OPP_RISK}")
    return text


def queue_place(job: dict[str, Any], now: datetime | None = None) -> Text:
    """`position 1 of 3 in tenant vision · estimated start in 12m (2026-11-22 01:22:00 UTC)`."""
    parts = []
    if job.get("pendingPosition") is not None:
        length = job.get("pendingQueueLength")
        of = f" of {length}" if length is not None else ""
        parts.append(f"position {job['pendingPosition']}{of} in tenant {job.get('tenant', '?')}")
    eta = job.get("estimatedStart")
    if eta:
        basis = job.get("estimatedStartBasis")
        parts.append(
            f"estimated start {relative_time(eta, now)} ({absolute_time(eta)} UTC)"
            + (f" from {basis}" if basis else "")
        )
    else:
        parts.append(f"no estimated start ({NO_ESTIMATE})")
    return Text(" · ".join(parts), style="dim")


def job_note(job: dict[str, Any]) -> Text:
    """Why a job ended (its reason) or why it waits (its pending reason)."""
    if job.get("reason"):
        style = "red" if job.get("state") == "FAILED" else ""
        return Text(str(job["reason"]), style=style)
    if job.get("pendingReason"):
        return Text(str(job["pendingReason"]), style="yellow")
    return Text("")


# -- jobs ------------------------------------------------------------------------------


def render_jobs(console: Console, jobs: list[dict[str, Any]], now: datetime | None = None) -> None:
    """The `gpuyard jobs` table."""
    if not jobs:
        console.print("no jobs", style="dim")
        return
    table = Table(box=None, header_style="bold", pad_edge=False)
    for name in ("ID", "NAME", "TENANT", "STATE", "GPUS", "ATTEMPT", "SUBMITTED"):
        table.add_column(name, no_wrap=name in ("ID", "STATE", "SUBMITTED"))
    table.add_column("REASON/PENDING", overflow="fold")
    for job in jobs:
        table.add_row(
            plain(job.get("id")),
            plain(job.get("name")),
            plain(job.get("tenant")),
            job_state(job),
            plain(job.get("gpus")),
            Text(attempt_cell(job)),
            Text(relative_time(job.get("submittedAt"), now)),
            job_note(job),
        )
    console.print(table)
    if any(j.get("opportunistic") for j in jobs):
        console.print(Text(f"{OPP}: {OPP_MEANS}", style="dim"))


# -- one job ---------------------------------------------------------------------------


def render_job(console: Console, job: dict[str, Any], now: datetime | None = None) -> None:
    """The `gpuyard show` page: header, pending panel, tasks, events."""
    console.print(job_header(job, now))
    if job.get("pendingReason") and job.get("state") not in FINAL_STATES:
        console.print(pending_panel(job, now))
    console.print(tasks_table(job.get("tasks") or []))
    console.print(events_table(job.get("events") or []))


def job_header(job: dict[str, Any], now: datetime | None = None) -> Panel:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row("name", plain(job.get("name")))
    grid.add_row("tenant", plain(job.get("tenant")))
    grid.add_row("state", job_state(job))
    if job.get("reason"):
        grid.add_row("reason", job_note({"reason": job["reason"], "state": job.get("state")}))
    if job.get("state") in ("SCHEDULED", "RUNNING"):
        grid.add_row("kind", kind_text(job))
    if job.get("arrayId"):
        grid.add_row("array", Text(f"index {job.get('arrayIndex')} of {job['arrayId']}"))
    if job.get("after"):
        waits = "; ".join(f"{k}: {', '.join(v)}" for k, v in job["after"].items())
        grid.add_row("after", Text(waits))
    for image in job.get("images") or []:
        grid.add_row("image", image_presence(image))
    grid.add_row("priority", plain(job.get("priority")))
    grid.add_row("gpus", plain(job.get("gpus")))
    grid.add_row("attempt", Text(attempt_summary(job)))
    grid.add_row("preempted", Text(times(job.get("preemptions"))))
    for label, key in (
        ("submitted", "submittedAt"),
        ("started", "startedAt"),
        ("finished", "finishedAt"),
    ):
        grid.add_row(label, Text(when_summary(job.get(key), now)))
    title = Text.assemble("job ", (str(job.get("id", "?")), "bold"))
    return Panel(grid, title=title, title_align="left", expand=False)


def image_presence(image: dict[str, Any]) -> Text:
    """`reg/app:1  present: ray-a, ray-b; pulling: ray-c` (the nodes by their image's state)."""
    by_state: dict[str, list[str]] = {}
    for node, state in sorted((image.get("nodes") or {}).items()):
        by_state.setdefault(state, []).append(node)
    where = "; ".join(f"{s}: {', '.join(n)}" for s, n in by_state.items()) or "on no node yet"
    return Text(f"{image.get('image')}  {where}")


def attempt_summary(job: dict[str, Any]) -> str:
    """`2 (retries used 1 of 3)`."""
    attempt = job.get("attempt")
    text = NONE if attempt is None else str(attempt)
    if job.get("retryCount") is not None:
        text += f" (retries used {job.get('retriesUsed') or 0} of {job['retryCount']})"
    return text


def times(count: Any) -> str:
    """`never`, `once`, `3 times`."""
    n = int(count or 0)
    return {0: "never", 1: "once"}.get(n, f"{n} times")


def when_summary(value: str | None, now: datetime | None = None) -> str:
    """`2026-11-22 01:02:03 UTC (3m ago)`."""
    if not value:
        return NONE
    return f"{absolute_time(value)} UTC ({relative_time(value, now)})"


def pending_panel(job: dict[str, Any], now: datetime | None = None) -> Panel:
    body = Text.assemble((str(job.get("pendingReason")), "yellow"))
    if job.get("pendingCode"):
        body.append(f" [{job['pendingCode']}]", style="dim")
    body.append("\n")
    body.append_text(queue_place(job, now))
    return Panel(
        body,
        title=Text(f"{job.get('state')}: waiting because", style="bold yellow"),
        title_align="left",
        border_style="yellow",
        expand=False,
    )


def tasks_table(tasks: list[dict[str, Any]]) -> Table | Text:
    if not tasks:
        return Text("no tasks yet", style="dim")
    table = Table(title="tasks", title_justify="left", title_style="bold", header_style="bold")
    for name in ("TASK", "ATTEMPT", "STATE", "NODE", "GPUS", "EXIT", "REASON"):
        table.add_column(name, no_wrap=name in ("TASK", "STATE"))
    for task in tasks:
        table.add_row(
            Text(f"{task.get('role', '?')}/{task.get('index', '?')}"),
            plain(task.get("attempt")),
            state_text(task.get("state")),
            plain(task.get("node")),
            format_task_gpus(task.get("gpus"), task.get("gpuMemoryMB") or 0),
            plain(task.get("exitCode")),
            task_reason(task),
        )
    return table


def task_reason(task: dict[str, Any]) -> Text:
    """A task's reason and, dimmer, its message."""
    text = Text(str(task.get("reason") or ""))
    if task.get("message"):
        if text:
            text.append(": ")
        text.append(str(task["message"]), style="dim")
    return text if text else plain(None)


def transition(event: dict[str, Any]) -> Text:
    """`QUEUED → SCHEDULED`; the first event comes from `(new)`."""
    source = event.get("fromState")
    text = state_text(source) if source else Text("(new)", style="dim")
    text.append(" → ")
    text.append_text(state_text(event.get("toState")))
    return text


def events_table(events: list[dict[str, Any]]) -> Table | Text:
    if not events:
        return Text("no events", style="dim")
    table = Table(title="events", title_justify="left", title_style="bold", header_style="bold")
    for name in ("TIME (UTC)", "TRANSITION", "REASON", "TASK", "MESSAGE"):
        table.add_column(name, no_wrap=name in ("TIME (UTC)", "TRANSITION"))
    for event in events:
        table.add_row(
            Text(absolute_time(event.get("time"))),
            transition(event),
            plain(event.get("reason")),
            task_ref(event),
            plain(event.get("message")),
        )
    return table


def task_ref(event: dict[str, Any]) -> Text:
    """An event's `role/index` and, when known, its attempt: `worker/0 #2`."""
    if not event.get("task"):
        return plain(None)
    text = Text(str(event["task"]))
    if event.get("attempt") is not None:
        text.append(f" #{event['attempt']}", style="dim")
    return text


# -- nodes -----------------------------------------------------------------------------


def render_nodes(console: Console, nodes: list[dict[str, Any]]) -> None:
    """The `gpuyard nodes` page: a header line and a GPU table per node."""
    if not nodes:
        console.print("no nodes", style="dim")
        return
    for number, node in enumerate(nodes):
        if number:
            console.print()
        console.print(node_header(node))
        console.print(gpus_table(node.get("gpus") or []))


def node_header(node: dict[str, Any]) -> Text:
    """`node-1 (10.0.0.5)  CPU 4/16  memory 8/64 GiB  GPUs 1/4 in use`, then CORDONED or
    DRAINING (with who, why, until when), or UNSCHEDULABLE when the engine says so."""
    allocated = node.get("allocated") or {}
    gpus = node.get("gpus") or []
    text = Text(str(node.get("name", "?")), style="bold")
    if node.get("address") and node.get("address") != "127.0.0.1":
        text.append(f" ({node['address']})", style="dim")
    text.append(f"  CPU {format_cpu(allocated.get('cpu', 0))}/{format_cpu(node.get('cpu'))}")
    text.append(
        f"  memory {format_mb(allocated.get('memoryMB', 0))}/{format_mb(node.get('memoryMB'))}"
    )
    text.append(f"  GPUs {allocated.get('gpus', 0)}/{len(gpus)} in use")
    cordon = node.get("cordon")
    if cordon:
        text.append(f"  {str(cordon.get('state', 'cordoned')).upper()}", style="bold yellow")
        details = [f"by {cordon['by']}" if cordon.get("by") else None, cordon.get("reason")]
        if cordon.get("deadline"):
            details.append(f"jobs preempted from {cordon['deadline']}")
        shown = [d for d in details if d]
        if shown:
            text.append(f" ({'; '.join(shown)})", style="yellow")
    elif node.get("schedulable") is False:
        text.append("  UNSCHEDULABLE", style="bold red")
    return text


def gpus_table(gpus: Iterable[dict[str, Any]]) -> Table | Text:
    gpus = list(gpus)
    if not gpus:
        return Text("  no GPUs", style="dim")
    table = Table(header_style="bold")
    for name in ("GPU", "TYPE", "MEMORY", "KIND", "HEALTH", "STATE", "JOB", "TENANT"):
        table.add_column(name, no_wrap=True)
    for gpu in gpus:
        table.add_row(
            plain(gpu.get("index")),
            plain(gpu.get("type")),
            Text(format_mb(gpu.get("memoryMB"))),
            Text("FAKE", style="bold magenta") if gpu.get("fake") else Text("real"),
            health_text(gpu.get("healthy"), gpu.get("healthCause")),
            gpu_state_text(gpu),
            gpu_holder(gpu),
            plain(gpu_tenants(gpu)),
        )
    return table


def gpu_tenants(gpu: dict[str, Any]) -> str | None:
    tenants = {u["tenant"] for u in gpu.get("users") or [] if u.get("tenant")}
    return ", ".join(sorted(tenants)) or gpu.get("tenant")


GPU_STATE_STYLES = {"free": "green", "used": "yellow", "unhealthy": "bold red", "cordoned": "dim"}


def gpu_state_text(gpu: dict[str, Any]) -> Text:
    """free, used, unhealthy or cordoned (as the API says; older servers: from busy)."""
    state = gpu.get("state") or ("used" if gpu.get("busy") else "free")
    return Text(str(state), style=GPU_STATE_STYLES.get(str(state), ""))


def gpu_holder(gpu: dict[str, Any]) -> Text:
    """The jobs on a GPU, `busy` (held by a job you may not see) or `free`."""
    jobs = [u["job"] for u in gpu.get("users") or [] if u.get("job")]
    if jobs:
        return plain(", ".join(dict.fromkeys(jobs)))
    if gpu.get("job"):
        return plain(gpu.get("job"))
    return Text("busy", style="yellow") if gpu.get("busy") else Text("free", style="green")


def health_text(healthy: Any, cause: Any = None) -> Text:
    if healthy is None:
        return plain(None)
    if healthy:
        return Text("healthy", style="green")
    return Text(f"UNHEALTHY ({cause})" if cause else "UNHEALTHY", style="bold red")


# -- submit ----------------------------------------------------------------------------


def render_spec_errors(console: Console, detail: str, errors: list[dict[str, Any]]) -> None:
    """A 422: the server's sentence, then one `path: message` line per field error."""
    console.print(Text.assemble(("spec rejected: ", "bold red"), str(detail)))
    lines = [
        Text.assemble(
            "  • ", (str(e.get("path") or "(spec)"), "bold"), ": ", str(e.get("message", ""))
        )
        for e in errors
    ]
    if lines:
        console.print(Group(*lines))


def render_submitted(console: Console, job: dict[str, Any]) -> None:
    """Hints after a submit (the id itself goes to stdout, alone, for scripts)."""
    job_id = job.get("id", "?")
    console.print(Text(f"  see it:  gpuyard show {job_id}", style="dim"))
    console.print(Text(f"  logs:    gpuyard logs {job_id} -f", style="dim"))


def wait_status(job: dict[str, Any]) -> Text:
    """The spinner line while waiting: `QUEUED: waiting for 4 GPUs`."""
    text = Text.assemble("job ", (str(job.get("id", "?")), "bold"), " ")
    text.append_text(state_text(job.get("state")))
    if job.get("pendingReason"):
        text.append(f": {job['pendingReason']}", style="yellow")
    elif job.get("state") == "RUNNING":
        text.append(": waiting for the job to end", style="dim")
    return text


def final_status(job: dict[str, Any]) -> Text:
    """`job abc SUCCEEDED`, or `job abc FAILED: OOMKilled` and, on its own line, what the
    reason means for this job (its message: the limit it hit, the last lines of its log)."""
    text = Text.assemble("job ", (str(job.get("id", "?")), "bold"), " ")
    text.append_text(state_text(job.get("state")))
    if job.get("reason"):
        text.append(f": {job['reason']}")
    if job.get("message") and job.get("state") != "SUCCEEDED":
        text.append(f"\n  {job['message']}")
    return text
