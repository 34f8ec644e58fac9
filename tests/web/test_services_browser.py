"""A job's web service opened from its job page in Debian's Chromium, against the real
`gpuyard up` server and a real container (tests/web/conftest.py): the page links the service
while the job runs, the link opens (a new tab) the task's own page through the platform, and
the page's relative link stays below the service's prefix (docs/services.md)."""

from __future__ import annotations

import re

import pytest

from e2e.conftest import Server, make_server  # noqa: F401 - the fixture
from web.conftest import LAPTOP, SCREENSHOTS

pytestmark = [pytest.mark.e2e, pytest.mark.container]

INDEX = "<h1>served-from-the-task</h1><a id=next href=next.html>next</a>"
JOB = f"""name: notebook-like
services: {{web: 8000}}
taskRoles:
  main:
    cpuNumber: 0.5
    memoryMB: 256
    command: >-
      cd /workspace && echo '{INDEX}' > index.html && echo '<p id=second>second page</p>' >
      next.html && exec python3 -m http.server 8000
"""
WAIT_MS = 30_000


@pytest.fixture
def live_server(make_server) -> Server:  # noqa: F811
    """A server of this test's own (its task subnet chosen for this test)."""
    return make_server()


def test_a_service_link_on_the_job_page_opens_the_tasks_page(live_server, browser):
    job_id = live_server.submit(JOB)
    live_server.wait(job_id, {"RUNNING"})
    context = browser.new_context(viewport=LAPTOP)
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    page.goto(f"{live_server.url}/login?next=/jobs/{job_id}")
    page.fill("#token", live_server.token)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(rf".*/jobs/{job_id}$"))
    link = page.locator("#services a.service-link", has_text="web")
    assert link.get_attribute("href") == f"/jobs/{job_id}/services/web/"
    for _ in range(40):  # the task's server listens a moment after the task runs
        with context.expect_page() as opened:
            link.click()
        tab = opened.value
        tab.wait_for_load_state()
        if tab.locator("h1").count():
            break
        tab.close()
        page.wait_for_timeout(250)
    assert tab.locator("h1").inner_text() == "served-from-the-task"
    assert tab.url == f"{live_server.url}/jobs/{job_id}/services/web/"
    tab.click("#next")
    tab.wait_for_url(f"{live_server.url}/jobs/{job_id}/services/web/next.html")
    assert tab.locator("#second").inner_text() == "second page"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SCREENSHOTS / "job-services-laptop.png", full_page=True)
