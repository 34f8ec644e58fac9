"""The preemption count and what an estimated start rests on, as `gpuyard show`, `gpuyard jobs`
(both its paths: rich and the fast plain table) and `gpuyard queue` print them."""

from __future__ import annotations

from typing import Any

import pytest
from cli_samples import NOW, job
from rich.console import Console

from gpuyard.cli import render, render_queue
from gpuyard.cli.plaintable import jobs_table

BASIS = "the run times of 3 running jobs: 2 by maxRuntime, 1 learned from history"
ETA = "2026-11-22T01:50:00.000Z"


def shown(draw, *args: Any) -> str:
    console = Console(record=True, width=200)
    draw(console, *args)
    return console.export_text()


@pytest.mark.parametrize(
    ("preemptions", "header", "attempt"),
    [(0, "never", "3"), (1, "once", "3 (1 preempted)"), (2, "2 times", "3 (2 preempted)")],
)
def test_preemptions_in_show_and_jobs(preemptions, header, attempt):
    j = job("RUNNING", attempt=3, preemptions=preemptions)
    assert f"preempted  {header}" in shown(render.render_job, j, NOW)
    for text in (shown(render.render_jobs, [j], NOW), jobs_table([j], now=NOW)):
        row = next(line for line in text.splitlines() if "j-7f3a" in line)
        assert f" {attempt} " in row and ("preempted" in row) == bool(preemptions)


def waiting(**extra: Any) -> dict[str, Any]:
    return job("QUEUED", pendingReason="needs 4 GPUs", pendingPosition=1, **extra)


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (
            {"estimatedStart": ETA, "estimatedStartBasis": BASIS},
            f"(2026-11-22 01:50:00 UTC) from {BASIS}",
        ),
        ({"estimatedStart": ETA}, "(2026-11-22 01:50:00 UTC)"),
        ({}, "no estimated start (neither the running jobs' maxRuntime nor their learned"),
    ],
)
def test_show_says_what_the_estimate_rests_on(extra, words):
    assert words in shown(render.render_job, waiting(**extra), NOW)


def test_queue_shows_the_estimate_behind_every_eta():
    queue = [
        {"id": "j-1", "position": 1, "estimatedStart": ETA, "estimatedStartBasis": BASIS},
        {"id": "j-2", "position": 2, "estimatedStart": None, "estimatedStartBasis": None},
    ]
    data = {"tenants": [{"name": "red", "queue": queue}]}
    console = Console(record=True, width=80)  # a line per estimate reads at any width
    render_queue.render_queue(console, data, NOW)
    text = " ".join(console.export_text().split())
    assert f"j-1 starts in 40m: estimated from {BASIS}" in text
    assert text.count("estimated from") == 1  # j-2 has no estimate
