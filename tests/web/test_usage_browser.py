"""The Usage page in Debian's Chromium against the real `gpuyard up` server and real
containers (tests/web/conftest.py): a job holding a fake GPU runs and ends, and within seconds
(the roll-up runs 5 s after a job ends) the page draws its two charts: a GPU-hours bar and a
wait point for the default tenant, and the report's row."""

from __future__ import annotations

import re

import pytest

from e2e.conftest import Server, make_server  # noqa: F401 - the fixture
from web.conftest import LAPTOP, SCREENSHOTS

pytestmark = [pytest.mark.e2e, pytest.mark.container]

JOB = "name: usage-run\ntaskRoles:\n  main:\n    gpuNumber: 1\n    command: sleep 2\n"
WAIT_MS = 60_000


@pytest.fixture
def live_server(make_server) -> Server:  # noqa: F811
    """A server of this test's own: it starts after this test's task subnet is chosen
    (tests/conftest.py), so it never meets another server's network."""
    return make_server()


def test_the_usage_page_draws_its_charts(live_server, browser):
    job_id = live_server.submit(JOB)
    assert live_server.wait(job_id)["state"] == "SUCCEEDED"
    page = browser.new_context(viewport=LAPTOP).new_page()
    page.set_default_timeout(WAIT_MS)
    page.goto(f"{live_server.url}/login")
    page.fill("#token", live_server.token)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r".*/jobs$"))
    for _ in range(30):  # the roll-up: within ROLLUP_AFTER_END_S of the end, and a cycle
        page.goto(f"{live_server.url}/usage?by=job")
        if page.locator("svg.chart rect.bar").count():
            break
        page.wait_for_timeout(1000)
    bars = page.locator('svg.chart[aria-label="GPU-hours per tenant per day"] rect.bar')
    assert bars.count() >= 1
    assert "default" in bars.first.locator("title").text_content()
    dots = page.locator('svg.chart[aria-label="average wait per tenant per day"] circle')
    assert dots.count() >= 1
    assert job_id in page.inner_text("table.usage")
    assert page.locator("svg.chart").first.bounding_box()["width"] > 300  # drawn, not hidden
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SCREENSHOTS / "usage-laptop.png", full_page=True)
