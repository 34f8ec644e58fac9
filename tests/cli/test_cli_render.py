"""Rendering of API answers, checked on the text a person would read."""

from __future__ import annotations

from datetime import timedelta

import pytest
from cli_samples import NOW, gpu, job, task
from rich.console import Console

from gpuyard.cli import render, times


def shown(draw, *args, **kwargs) -> str:
    console = Console(record=True, width=120)
    draw(console, *args, **kwargs)
    return console.export_text()


def iso(delta: timedelta) -> str:
    return (NOW - delta).strftime("%Y-%m-%dT%H:%M:%S.000Z")


@pytest.mark.parametrize(
    ("ago", "expected"),
    [
        (timedelta(seconds=2), "just now"),
        (timedelta(seconds=42), "42s ago"),
        (timedelta(minutes=3, seconds=59), "3m ago"),
        (timedelta(hours=2, minutes=30), "2h ago"),
        (timedelta(days=4, hours=23), "4d ago"),
        (timedelta(seconds=-20), "just now"),
        (timedelta(minutes=-5), "in 5m"),
    ],
)
def test_relative_time(ago: timedelta, expected: str) -> None:
    assert times.relative_time(iso(ago), NOW) == expected


def test_relative_time_without_a_time() -> None:
    assert times.relative_time(None, NOW) == "-"
    assert times.relative_time("", NOW) == "-"
    assert times.relative_time("yesterday-ish", NOW) == "yesterday-ish"


def test_parse_time_reads_z_and_offsets() -> None:
    assert times.parse_time("2026-11-22T01:10:00.000Z") == NOW
    assert times.parse_time("2026-11-22T02:10:00+01:00") == NOW
    assert times.parse_time("2026-11-22T01:10:00") == NOW  # naive means UTC
    assert times.parse_time("nonsense") is None
    assert times.absolute_time("2026-11-22T01:02:03.456Z") == "2026-11-22 01:02:03"


@pytest.mark.parametrize(
    ("mb", "expected"),
    [(512, "512 MiB"), (81920, "80 GiB"), (1536, "1.5 GiB"), (None, "-")],
)
def test_format_mb(mb, expected: str) -> None:
    assert render.format_mb(mb) == expected


def test_task_gpus_say_fake_only_when_fake() -> None:
    assert render.format_task_gpus([gpu(0), gpu(1)]).plain == "0,1 H100 (fake)"
    assert render.format_task_gpus([gpu(3, fake=False)]).plain == "3 H100"
    assert render.format_task_gpus([]).plain == "-"
    assert render.format_task_gpus([gpu(2)], 20480).plain == "2 H100 shared 20 GiB (fake)"


def test_jobs_table() -> None:
    jobs = [
        job("QUEUED", id="j-2", name="big", pendingReason="waiting for 8 GPUs [H100]",
            submittedAt=iso(timedelta(minutes=3))),
        job("FAILED", id="j-1", reason="OOMKilled", attempt=2, submittedAt=iso(timedelta(hours=1))),
        job("RUNNING", id="j-0", name="plain"),
    ]
    text = shown(render.render_jobs, jobs, NOW)
    header = text.splitlines()[0].split()
    assert header == ["ID", "NAME", "TENANT", "STATE", "GPUS", "ATTEMPT", "SUBMITTED",
                      "REASON/PENDING"]
    queued, failed, running = text.splitlines()[1:4]
    assert queued.split()[:5] == ["j-2", "big", "vision", "QUEUED", "2"]
    assert "3m ago" in queued and "waiting for 8 GPUs [H100]" in queued  # not eaten as markup
    assert "FAILED" in failed and "1h ago" in failed and failed.rstrip().endswith("OOMKilled")
    assert "RUNNING" in running


def test_jobs_table_colours_states() -> None:
    console = Console(record=True, width=120, force_terminal=True, color_system="truecolor")
    render.render_jobs(console, [job("FAILED")], NOW)
    html = console.export_html(inline_styles=True)
    assert "FAILED" in html and "color: #800000" in html  # red


def test_no_jobs() -> None:
    assert shown(render.render_jobs, [], NOW).strip() == "no jobs"


def test_show_queued_job_has_pending_panel() -> None:
    queued = job("QUEUED", pendingReason="tenant vision is over its quota of 4 GPUs",
                 events=[{"time": "2026-11-22T01:07:00.000Z", "fromState": None,
                          "toState": "QUEUED", "reason": "Submitted", "message": None,
                          "task": None, "attempt": 1}])
    text = shown(render.render_job, queued, NOW)
    assert "job j-7f3a" in text
    assert "QUEUED: waiting because" in text
    assert "tenant vision is over its quota of 4 GPUs" in text
    assert "attempt    1 (retries used 0 of 3)" in text
    assert "2026-11-22 01:07:00 UTC (3m ago)" in text
    assert "no tasks yet" in text
    assert "(new) → QUEUED" in text and "Submitted" in text


def test_show_finished_job_tasks_and_events() -> None:
    failed = job(
        "FAILED", attempt=2, retriesUsed=1, reason="Error(exit 3)",
        tasks=[
            task(2, "FAILED", exitCode=3, reason="Error(exit 3)", message="boom [x]"),
            task(1, "FAILED", exitCode=137, reason="OOMKilled",
                 gpus=[gpu(5, fake=False, gpu_type="A100")]),
        ],
        events=[
            {"time": "2026-11-22T01:07:00.000Z", "fromState": None, "toState": "QUEUED",
             "reason": "Submitted", "message": None, "task": None, "attempt": 1},
            {"time": "2026-11-22T01:08:00.000Z", "fromState": "RUNNING", "toState": "QUEUED",
             "reason": "OOMKilled", "message": "retrying", "task": "worker/0", "attempt": 1},
            {"time": "2026-11-22T01:09:30.000Z", "fromState": "RUNNING", "toState": "FAILED",
             "reason": "Error(exit 3)", "message": None, "task": "worker/0", "attempt": 2},
        ],
    )
    text = shown(render.render_job, failed, NOW)
    assert "waiting because" not in text
    assert "reason     Error(exit 3)" in text
    rows = [line for line in text.splitlines() if "worker/0" in line and "node-1" in line]
    assert len(rows) == 2
    assert "0,1 H100 (fake)" in rows[0] and "3" in rows[0] and "boom [x]" in rows[0]
    assert "5 A100" in rows[1] and "(fake)" not in rows[1] and "137" in rows[1]
    assert "RUNNING → QUEUED" in text and "worker/0 #1" in text and "retrying" in text
    assert "2026-11-22 01:09:30" in text and "RUNNING → FAILED" in text
    assert text.index("(new) → QUEUED") < text.index("RUNNING → FAILED")


def test_show_tolerates_missing_fields() -> None:
    text = shown(render.render_job, {"id": "j-x", "state": "QUEUED"}, NOW)
    assert "job j-x" in text and "no events" in text


def test_nodes() -> None:
    nodes = [
        {"name": "node-1", "cpu": 16.0, "memoryMB": 65536, "schedulable": True,
         "allocated": {"cpu": 4.5, "memoryMB": 8192, "gpus": 1},
         "gpus": [
             {"index": 0, "uuid": "u0", "type": "H100", "memoryMB": 81920, "fake": True,
              "healthy": True, "job": "j-7f3a"},
             {"index": 1, "uuid": "u1", "type": "H100", "memoryMB": 81920, "fake": False,
              "healthy": False, "job": None},
         ]},
        {"name": "cpu-only", "cpu": 8, "memoryMB": 512, "schedulable": False,
         "allocated": {"cpu": 0, "memoryMB": 0, "gpus": 0}, "gpus": []},
    ]
    text = shown(render.render_nodes, nodes)
    assert "node-1  CPU 4.5/16  memory 8 GiB/64 GiB  GPUs 1/2 in use" in text
    gpu0 = next(line for line in text.splitlines() if "j-7f3a" in line)
    assert "H100" in gpu0 and "80 GiB" in gpu0 and "FAKE" in gpu0 and "healthy" in gpu0
    gpu1 = next(line for line in text.splitlines() if "UNHEALTHY" in line)
    assert "real" in gpu1 and "free" in gpu1 and "FAKE" not in gpu1
    assert "cpu-only  CPU 0/8  memory 0 MiB/512 MiB  GPUs 0/0 in use  UNSCHEDULABLE" in text
    assert "no GPUs" in text


def test_spec_errors_are_a_readable_list() -> None:
    errors = [{"path": "taskRoles.worker.gpuNumber", "message": "must be >= 0 [got -1]"},
              {"path": "", "message": "unknown key 'foo'"}]
    text = shown(render.render_spec_errors, "the job spec is invalid", errors)
    lines = text.splitlines()
    assert lines[0] == "spec rejected: the job spec is invalid"
    assert lines[1].strip() == "• taskRoles.worker.gpuNumber: must be >= 0 [got -1]"
    assert lines[2].strip() == "• (spec): unknown key 'foo'"


def test_wait_and_final_status_lines() -> None:
    assert render.wait_status(job("QUEUED", pendingReason="no free GPUs")).plain == (
        "job j-7f3a QUEUED: no free GPUs")
    assert render.wait_status(job("SCHEDULED")).plain == "job j-7f3a SCHEDULED"
    assert render.final_status(job("FAILED", reason="OOMKilled")).plain == (
        "job j-7f3a FAILED: OOMKilled")
    assert render.final_status(job("SUCCEEDED")).plain == "job j-7f3a SUCCEEDED"


def test_final_status_says_what_the_reason_means() -> None:
    failed = job("FAILED", reason="Error(exit 3)", message="exit 3; last log lines: boom")
    assert render.final_status(failed).plain == (
        "job j-7f3a FAILED: Error(exit 3)\n  exit 3; last log lines: boom")
    assert render.final_status(job("SUCCEEDED", message="all tasks completed")).plain == (
        "job j-7f3a SUCCEEDED")
