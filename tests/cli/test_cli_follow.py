"""`submit --wait`: which attempts' logs are streamed, and when the watcher stops.

The server is an httpx transport replaying a scripted sequence of JobDetail answers.
"""

from __future__ import annotations

import io
from typing import Any

import httpx
from cli_samples import job, task
from rich.console import Console

from gpuyard.cli.client import ApiClient
from gpuyard.cli.follow import JobWatcher, attempts_to_show, must_wait


class ScriptedServer:
    """Answers GET /jobs/{id} with the next scripted JobDetail (the last one repeats)."""

    def __init__(self, details: list[dict[str, Any]], logs: dict[str, str]) -> None:
        self.details = details
        self.logs = logs
        self.log_requests: list[dict[str, str]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/logs"):
            params = dict(request.url.params)
            self.log_requests.append(params)
            text = self.logs.get(params.get("attempt", ""))
            if text is None:
                return httpx.Response(404, json={"detail": "no logs for that attempt"})
            return httpx.Response(200, text=text)
        detail = self.details.pop(0) if len(self.details) > 1 else self.details[0]
        return httpx.Response(200, json=detail)


def watch(server: ScriptedServer) -> tuple[dict[str, Any], str, str]:
    http = httpx.Client(base_url="http://gpuyard.test", transport=httpx.MockTransport(server))
    out = io.StringIO()
    err = Console(record=True, width=120)
    final = JobWatcher(ApiClient(http), "j-7f3a", out, err, sleep=lambda _: None).run()
    return final, out.getvalue(), err.export_text()


def test_attempts_to_show() -> None:
    running = job("RUNNING", attempt=2, tasks=[task(2, "RUNNING", started=False),
                                               task(1, "FAILED")])
    assert attempts_to_show(running, set()) == [1, 2]
    assert attempts_to_show(running, {1, 2}) == []
    assert must_wait(running, {1, 2})
    requeued = job("QUEUED", attempt=2, tasks=[task(2, "PENDING", started=False),
                                               task(1, "FAILED")])
    assert attempts_to_show(requeued, set()) == [1]
    assert must_wait(requeued, {1})
    never_ran = job("STOPPED", tasks=[task(1, "STOPPED", started=False)])
    assert attempts_to_show(never_ran, set()) == []
    assert not must_wait(never_ran, set())


def test_success_streams_the_logs_then_stops() -> None:
    server = ScriptedServer(
        [job("QUEUED", pendingReason="waiting for 2 GPUs"), job("SCHEDULED"),
         job("RUNNING", tasks=[task(1, "RUNNING")]),
         job("SUCCEEDED", tasks=[task(1, "SUCCEEDED", exitCode=0)])],
        {"1": "epoch 1\nepoch 2\n"},
    )
    final, out, err = watch(server)
    assert final["state"] == "SUCCEEDED"
    assert out == "epoch 1\nepoch 2\n"
    assert server.log_requests == [{"attempt": "1", "follow": "true"}]
    assert "job j-7f3a QUEUED: waiting for 2 GPUs" in err
    assert "job j-7f3a SCHEDULED" in err


def test_a_retry_follows_the_new_attempt() -> None:
    failed_1 = task(1, "FAILED", exitCode=1, reason="Error(exit 1)")
    server = ScriptedServer(
        [job("RUNNING", tasks=[task(1, "RUNNING")]),
         job("QUEUED", attempt=2, pendingReason="retry in 5s",
             tasks=[task(2, "PENDING", started=False), failed_1]),
         job("RUNNING", attempt=2, tasks=[task(2, "RUNNING"), failed_1]),
         job("FAILED", attempt=2, reason="Error(exit 2)",
             tasks=[task(2, "FAILED", exitCode=2), failed_1])],
        {"1": "first try\n", "2": "second try\n"},
    )
    final, out, err = watch(server)
    assert final["state"] == "FAILED" and final["reason"] == "Error(exit 2)"
    assert out == "first try\nsecond try\n"
    assert [r["attempt"] for r in server.log_requests] == ["1", "2"]
    assert "attempt 2" in err and "retry in 5s" in err


def test_attempts_missed_between_polls_are_printed_whole() -> None:
    server = ScriptedServer(
        [job("QUEUED"),
         job("SUCCEEDED", attempt=2, tasks=[task(2, "SUCCEEDED"), task(1, "FAILED")])],
        {"1": "one\n", "2": "two\n"},
    )
    final, out, _ = watch(server)
    assert final["state"] == "SUCCEEDED"
    assert out == "one\ntwo\n"
    assert server.log_requests == [{"attempt": "1"}, {"attempt": "2"}]  # ended: not followed


def test_job_that_never_ran_has_no_logs() -> None:
    server = ScriptedServer([job("QUEUED"), job("STOPPED", reason="Cancelled")], {})
    final, out, err = watch(server)
    assert final["reason"] == "Cancelled"
    assert out == "" and server.log_requests == []


def test_missing_logs_do_not_stop_the_wait() -> None:
    server = ScriptedServer(
        [job("RUNNING", tasks=[task(1, "RUNNING")]),
         job("RUNNING", tasks=[task(1, "RUNNING")]),
         job("FAILED", reason="ImageError", tasks=[task(1, "FAILED")])],
        {},
    )
    final, out, err = watch(server)
    assert final["state"] == "FAILED"
    assert out == ""
    assert "waiting for the job to end" in err
    assert len(server.log_requests) == 1
