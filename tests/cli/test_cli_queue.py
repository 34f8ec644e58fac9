"""`gpuyard queue`, and the opportunistic and pending details of `jobs` and `show`, rendered
from API-shaped dicts (docs/api.md) and checked on the text a person reads."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from cli_samples import NOW, job
from rich.console import Console

from gpuyard.cli import render, render_queue
from gpuyard.cli.client import ApiClient


def shown(draw, *args, **kwargs) -> str:
    console = Console(record=True, width=140)
    draw(console, *args, **kwargs)
    return console.export_text()


def share(guaranteed: int, used: int, borrowed: int, lent: int) -> dict[str, Any]:
    return {
        "flavor": "A100-80GB",
        "guaranteed": guaranteed,
        "used": used,
        "borrowed": borrowed,
        "lent": lent,
        "borrowingLimit": None,
        "lendingLimit": None,
    }


def queued(position: int, **extra: Any) -> dict[str, Any]:
    base = {
        "id": f"j-{position}",
        "name": f"train-{position}",
        "owner": "alice",
        "gpus": 2,
        "priority": 0,
        "pendingCode": "InsufficientResources",
        "pendingReason": "needs 2 GPUs",
        "position": position,
        "queueLength": 2,
        "estimatedStart": None,
        "submittedAt": "2026-11-22T01:00:00.000Z",
    }
    return base | extra


QUEUE = {
    "cluster": [{"flavor": "A100-80GB", "capacity": 8, "allocated": 6}],
    "tenants": [
        {
            "name": "blue",
            "weight": 1.0,
            "queuePolicy": "fifo",
            "flavors": [share(2, 5, 3, 0)],
            "queue": [],
        },
        {
            "name": "red",
            "weight": 2.0,
            "queuePolicy": "las",
            "flavors": [share(4, 1, 0, 2)],
            "queue": [
                queued(1, estimatedStart="2026-11-22T01:22:00.000Z"),
                queued(2, pendingCode="WaitingForEarlierJob"),
            ],
        },
    ],
}


@pytest.mark.parametrize(
    ("numbers", "expected"),
    [
        ((2, 5, 3, 0), "██▓▓▓···"),  # within 2, borrows 3, rest of 8
        ((4, 1, 0, 2), "█▒▒░····"),  # uses 1 of 4; 2 lent, 1 idle
        ((0, 0, 0, 0), "········"),
        ((4, 4, 0, 0), "████····"),
    ],
)
def test_bar_segments_are_distinct(numbers, expected) -> None:
    assert render_queue.flavor_bar(share(*numbers), 8).plain == expected


def test_bar_scales_down_to_its_width() -> None:
    bar = render_queue.flavor_bar(share(64, 32, 0, 0), 1000, width=40).plain
    assert len(bar) <= 41 and bar.startswith("█") and "░" in bar and bar.endswith("·")


def test_queue_page() -> None:
    text = shown(render_queue.render_queue, QUEUE, NOW)
    assert "cluster  A100-80GB 6/8 allocated" in text
    assert "▓ borrowed" in text and "▒ lent to others" in text
    assert "blue  weight 1.0  fifo  0 queued" in text
    assert "red  weight 2.0  las  2 queued" in text
    assert "██▓▓▓···  guaranteed 2 · used 5 · borrowed 3 · lent 0" in text
    assert "█▒▒░····  guaranteed 4 · used 1 · borrowed 0 · lent 2" in text
    assert "queue empty" in text
    rows = [line for line in text.splitlines() if "j-1" in line or "j-2" in line]
    assert "InsufficientResources" in rows[0] and "in 12m" in rows[0] and "alice" in rows[0]
    assert "WaitingForEarlierJob" in rows[1] and rows[1].rstrip().endswith("-")


def test_queue_page_without_tenants_or_fields() -> None:
    assert "no tenants" in shown(render_queue.render_queue, {}, NOW)
    text = shown(
        render_queue.render_queue,
        {"tenants": [{"name": "x", "flavors": [{"flavor": "H100"}], "queue": [{}]}]},
        NOW,
    )
    assert "guaranteed - · used -" in text


def test_eta_text() -> None:
    assert render_queue.eta_text(None, NOW).plain == "-"
    assert render_queue.eta_text("2026-11-22T01:09:00.000Z", NOW).plain == "soon"
    assert render_queue.eta_text("2026-11-22T03:10:00.000Z", NOW).plain == "in 2h"


def test_jobs_table_marks_opportunistic_jobs() -> None:
    jobs = [
        job(
            "RUNNING", id="j-opp", opportunistic=True, borrowed=[{"flavor": "A100-80GB", "gpus": 1}]
        ),
        job("RUNNING", id="j-own", opportunistic=False, borrowed=[]),
    ]
    text = shown(render.render_jobs, jobs, NOW)
    opp = next(line for line in text.splitlines() if "j-opp" in line)
    own = next(line for line in text.splitlines() if "j-own" in line)
    assert "RUNNING OPP" in opp and "OPP" not in own
    assert "OPP: opportunistic" in text
    assert "OPP:" not in shown(render.render_jobs, [jobs[1]], NOW)


def test_show_opportunistic_job_says_what_it_borrows() -> None:
    running = job(
        "RUNNING",
        opportunistic=True,
        borrowed=[{"flavor": "A100-80GB", "gpus": 2}, {"flavor": "H100", "gpus": 1}],
    )
    text = shown(render.render_job, running, NOW)
    assert "RUNNING OPP" in text
    assert "opportunistic: borrows 2 A100-80GB GPUs, 1 H100 GPU" in text
    assert "may be preempted" in text
    assert "guaranteed (within" in shown(render.render_job, job("RUNNING"), NOW)


def test_show_queued_job_says_its_place_and_estimated_start() -> None:
    waiting = job(
        "QUEUED",
        pendingReason="needs 2 GPUs; 0 free",
        pendingCode="InsufficientResources",
        pendingPosition=2,
        pendingQueueLength=5,
        estimatedStart="2026-11-22T01:22:00.000Z",
    )
    text = shown(render.render_job, waiting, NOW)
    assert "needs 2 GPUs; 0 free [InsufficientResources]" in text
    assert "position 2 of 5 in tenant vision" in text
    assert "estimated start in 12m (2026-11-22 01:22:00 UTC)" in text
    no_eta = shown(render.render_job, waiting | {"estimatedStart": None}, NOW)
    assert "no estimated start" in no_eta


def test_client_queue_path() -> None:
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        return httpx.Response(200, json=QUEUE)

    http = httpx.Client(base_url="http://gpuyard.test", transport=httpx.MockTransport(answer))
    assert ApiClient(http).queue() == QUEUE
    assert seen == ["/api/v1/queue"]
