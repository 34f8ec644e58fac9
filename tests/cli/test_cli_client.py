"""`ApiClient` requests and error decoding, over an httpx transport and a real closed port."""

from __future__ import annotations

import json

import httpx
import pytest
from cli_samples import closed_port, job

from gpuyard.cli.client import (
    ApiClient,
    ApiError,
    ServerUnreachable,
    make_http_client,
)


class Recorder:
    """An httpx transport handler answering from a table and keeping every request."""

    def __init__(self, answers: dict[tuple[str, str], httpx.Response]) -> None:
        self.answers = answers
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.answers.get(
            (request.method, request.url.path), httpx.Response(404, json={"detail": "nope"})
        )


def client_for(recorder: Recorder, token: str | None = None) -> ApiClient:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx.Client(base_url="http://gpuyard.test", transport=httpx.MockTransport(recorder),
                        headers=headers)
    return ApiClient(http)


def test_submit_sends_yaml_bytes() -> None:
    recorder = Recorder({("POST", "/api/v1/jobs"): httpx.Response(
        201, json={"id": "j-1", "name": "x", "state": "QUEUED"})})
    spec = b"name: x\ntaskRoles: {}\n"
    assert client_for(recorder).submit_job(spec) == {"id": "j-1", "name": "x", "state": "QUEUED"}
    request = recorder.requests[0]
    assert request.content == spec
    assert request.headers["content-type"] == "application/yaml"


def test_list_jobs_repeats_state() -> None:
    recorder = Recorder({("GET", "/api/v1/jobs"): httpx.Response(200, json={"jobs": [job()]})})
    data = client_for(recorder).list_jobs(states=["RUNNING", "QUEUED"], tenant="vision", limit=5)
    assert data["jobs"][0]["id"] == "j-7f3a"
    params = recorder.requests[0].url.params
    assert params.get_list("state") == ["RUNNING", "QUEUED"]
    assert params["tenant"] == "vision" and params["limit"] == "5"


def test_list_jobs_without_filters_sends_no_params() -> None:
    recorder = Recorder({("GET", "/api/v1/jobs"): httpx.Response(200, json={"jobs": []})})
    client_for(recorder).list_jobs()
    assert str(recorder.requests[0].url) == "http://gpuyard.test/api/v1/jobs"


def test_endpoint_paths() -> None:
    recorder = Recorder({
        ("GET", "/healthz"): httpx.Response(200, json={"status": "ok"}),
        ("GET", "/api/v1/jobs/j-1"): httpx.Response(200, json=job()),
        ("POST", "/api/v1/jobs/j-1/cancel"): httpx.Response(202, json={"id": "j-1",
                                                                         "state": "RUNNING"}),
        ("GET", "/api/v1/jobs/j-1/events"): httpx.Response(200, json={"events": []}),
        ("GET", "/api/v1/nodes"): httpx.Response(200, json={"nodes": []}),
    })
    client = client_for(recorder, token="s3cret")
    assert client.health() == {"status": "ok"}
    assert client.get_job("j-1")["name"] == "mnist-train"
    assert client.cancel_job("j-1")["state"] == "RUNNING"
    assert client.job_events("j-1") == {"events": []}
    assert client.nodes() == {"nodes": []}
    assert all(r.headers["authorization"] == "Bearer s3cret" for r in recorder.requests)


def test_make_http_client_sends_token_only_when_set() -> None:
    with make_http_client("http://h:1/", "tok") as http:
        assert http.headers["authorization"] == "Bearer tok"
        assert str(http.base_url) == "http://h:1"
    with make_http_client("http://h:1", None) as http:
        assert "authorization" not in http.headers


def test_logs_query_and_stream() -> None:
    recorder = Recorder({("GET", "/api/v1/jobs/j-1/logs"): httpx.Response(
        200, text="line 1\nline 2\n", headers={"content-type": "text/plain"})})
    client = client_for(recorder)
    assert client.job_logs("j-1", task="worker/1", attempt=2, tail=10) == "line 1\nline 2\n"
    assert "".join(client.stream_logs("j-1", follow=True)) == "line 1\nline 2\n"
    first, second = (r.url.params for r in recorder.requests)
    assert dict(first) == {"task": "worker/1", "attempt": "2", "tail": "10"}
    assert dict(second) == {"follow": "true"}


def test_stream_logs_error_carries_detail() -> None:
    recorder = Recorder({("GET", "/api/v1/jobs/j-1/logs"): httpx.Response(
        404, json={"detail": "no task worker/9 in job j-1"})})
    with pytest.raises(ApiError) as caught:
        list(client_for(recorder).stream_logs("j-1", task="worker/9"))
    assert caught.value.status == 404
    assert caught.value.detail == "no task worker/9 in job j-1"


def test_validation_error_keeps_field_errors() -> None:
    body = {"detail": "the job spec is invalid",
            "errors": [{"path": "taskRoles.worker.gpuNumber", "message": "must be >= 0"}]}
    recorder = Recorder({("POST", "/api/v1/jobs"): httpx.Response(422, json=body)})
    with pytest.raises(ApiError) as caught:
        client_for(recorder).submit_job(b"x")
    assert caught.value.status == 422
    assert caught.value.detail == "the job spec is invalid"
    assert caught.value.errors == body["errors"]


@pytest.mark.parametrize(
    ("response", "detail"),
    [
        (httpx.Response(500, text="Internal Server Error"), "Internal Server Error"),
        (httpx.Response(502), "HTTP 502 Bad Gateway"),
        (httpx.Response(409, content=json.dumps({"detail": "job j-1 already ended"}).encode()),
         "job j-1 already ended"),
    ],
)
def test_error_detail_from_any_body(response: httpx.Response, detail: str) -> None:
    recorder = Recorder({("POST", "/api/v1/jobs/j-1/cancel"): response})
    with pytest.raises(ApiError) as caught:
        client_for(recorder).cancel_job("j-1")
    assert caught.value.detail == detail


def test_refused_connection_is_server_unreachable() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    client = ApiClient(make_http_client(url))
    with pytest.raises(ServerUnreachable) as caught:
        client.list_jobs()
    assert caught.value.url == url
    with pytest.raises(ServerUnreachable):
        list(client.stream_logs("j-1", follow=True))
