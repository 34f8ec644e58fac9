"""/metrics tells its series only to the scraper and platform admins.

Before: open by default, listing every tenant's job ids and their usage to anyone who could
reach the port (a task on the host network included). Now a scrape needs the scrape token
(`<data dir>/metrics-token`, made 0600 at first start, unless a token file is given) or a
platform admin's API token; `gpuyard up --metrics-open` serves it to anyone, without job,
task and user labels.
"""

from __future__ import annotations

import os
import stat

import httpx
import pytest

pytestmark = [pytest.mark.e2e]

SLEEPER = """\
name: sleeper
taskRoles:
  main:
    cpuNumber: 0.2
    memoryMB: 128
    gpuNumber: 1
    command: "sleep 60"
"""


def member_token(server) -> str:
    r = server.http.post(
        "/api/v1/users",
        json={"name": "mallory", "memberships": [{"tenant": "default", "role": "member"}]},
    )
    assert r.status_code == 201, r.text
    r = server.http.post("/api/v1/users/mallory/tokens", json={"name": "t"})
    assert r.status_code == 201, r.text
    return r.json()["token"]


def scrape(server, token: str | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.get(f"{server.url}/metrics", headers=headers, timeout=10)


def test_metrics_need_the_scrape_token_or_an_admin(server):
    assert scrape(server, None).status_code == 401
    assert scrape(server, "gy_not-a-token").status_code == 401
    assert scrape(server, member_token(server)).status_code == 403
    token_file = server.data_dir / "metrics-token"
    assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
    scraped = scrape(server, token_file.read_text().strip())
    assert scraped.status_code == 200 and "gpuyard_jobs" in scraped.text
    assert scrape(server, server.token).status_code == 200


@pytest.mark.container
def test_an_open_metrics_names_no_job(make_server):
    server = make_server("--metrics-open")
    job = server.submit(SLEEPER)
    server.wait(job, {"RUNNING"})
    r = scrape(server, None)
    assert r.status_code == 200
    assert 'tenant="default"' in r.text
    assert job not in r.text and "job=" not in r.text and "task=" not in r.text
