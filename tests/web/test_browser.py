"""The portal in a real browser (Debian's Chromium through Playwright) against the real
server: log in with the admin token, meet a field error, submit a job through the form, watch
it run to SUCCEEDED, read its log, cancel a long job, visit the cluster and tenants pages,
and write a screenshot of each page (laptop and phone) to artifacts/screenshots/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from web.conftest import LAPTOP, PHONE

pytestmark = [pytest.mark.e2e, pytest.mark.container]

BAD_SPEC = """\
name: from-the-browser
tenant: default
taskRoles:
  main:
    gpuNumber: two
    command: echo hi
"""
GOOD_SPEC = """\
name: from-the-browser
tenant: default
taskRoles:
  main:
    cpuNumber: 0.5
    memoryMB: 128
    command: for i in 1 2 3; do echo "portal step $i"; done; echo all-done
"""
LONG_SPEC = "name: long-sleep\ntaskRoles:\n  main:\n    cpuNumber: 0.5\n    command: sleep 300\n"
WAIT_MS = 60_000


def test_a_user_journey_through_the_portal(live_server, browser, shots: Path):
    ctx = browser.new_context(viewport=LAPTOP)
    page = ctx.new_page()
    page.set_default_timeout(WAIT_MS)

    # log in: a wrong token first, then the admin token
    page.goto(f"{live_server.url}/jobs")
    assert "/login" in page.url
    page.fill("#token", "gy_wrong")
    page.click("button[type=submit]")
    page.wait_for_selector(".flash.error")
    assert "unknown" in page.inner_text(".flash.error")
    page.screenshot(path=shots / "login-laptop.png")
    page.fill("#token", live_server.token)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r".*/jobs$"))

    # submit: a field error while typing, then a valid spec through the form
    page.goto(f"{live_server.url}/submit")
    page.fill("#spec", BAD_SPEC)
    page.wait_for_selector("#validation.bad >> text=taskRoles.main.gpuNumber")
    page.screenshot(path=shots / "submit-error-laptop.png", full_page=True)
    page.fill("#spec", GOOD_SPEC)
    page.wait_for_selector("#validation.ok")
    page.click("#submit")
    page.wait_for_url(re.compile(r".*/jobs/[0-9a-f]+$"))
    job_url = page.url

    # watch it run (htmx polls the page) and read its log
    page.wait_for_selector("#job-live h1 .state-succeeded")
    page.wait_for_selector("#log pre >> text=all-done")
    assert "portal step 3" in page.inner_text("#log pre")
    assert "main/0" in page.inner_text("#job-live")
    page.screenshot(path=shots / "job-laptop.png", full_page=True)

    # cancel another job, a long sleep, once it runs
    long_id = live_server.submit(LONG_SPEC)
    page.goto(f"{live_server.url}/jobs/{long_id}")
    page.wait_for_selector("#job-live h1 .state-running")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#cancel")
    page.wait_for_selector("#job-live h1 .state-stopped")
    assert "Cancelled" in page.inner_text("#job-live")

    # the jobs list, live: both jobs with their end states
    page.goto(f"{live_server.url}/jobs")
    page.wait_for_selector(f"tr[data-job='{long_id}'] .state-stopped")
    assert "from-the-browser" in page.inner_text("#jobs-table")
    page.screenshot(path=shots / "jobs-laptop.png", full_page=True)

    # a job holding GPUs, for the cluster and tenants pages
    gpu_id = live_server.submit(
        "name: gpu-sleeper\ntaskRoles:\n  main:\n    gpuNumber: 2\n    command: sleep 300\n"
    )
    live_server.wait(gpu_id, {"RUNNING"})
    queued_id = live_server.submit(
        "name: waits-for-gpus\ntaskRoles:\n  main:\n    gpuNumber: 4\n    command: 'true'\n"
    )
    page.goto(f"{live_server.url}/cluster")
    page.wait_for_selector(f".gpu.busy >> text={gpu_id}")
    assert "fake" in page.inner_text("#cluster-grid")
    page.screenshot(path=shots / "cluster-laptop.png", full_page=True)
    page.goto(f"{live_server.url}/tenants")
    page.wait_for_selector(".quota-bar")
    page.screenshot(path=shots / "tenants-laptop.png", full_page=True)

    page.goto(f"{live_server.url}/jobs/{queued_id}")
    page.wait_for_selector(".pending")
    page.screenshot(path=shots / "job-queued-laptop.png", full_page=True)

    # the same pages on a phone: navigation collapses, tables scroll sideways
    phone = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
    phone.add_cookies(ctx.cookies())
    mobile = phone.new_page()
    mobile.set_default_timeout(WAIT_MS)
    mobile.goto(f"{live_server.url}/jobs")
    assert not mobile.is_visible("nav.nav")
    mobile.screenshot(path=shots / "jobs-phone.png", full_page=True)
    mobile.click(".nav-button")
    assert mobile.is_visible("nav.nav")
    mobile.screenshot(path=shots / "nav-phone.png")
    mobile.goto(job_url)
    mobile.wait_for_selector("#log pre >> text=all-done")
    mobile.screenshot(path=shots / "job-phone.png", full_page=True)
    for name in ("submit", "cluster", "tenants"):
        mobile.goto(f"{live_server.url}/{name}")
        mobile.screenshot(path=shots / f"{name}-phone.png", full_page=True)
    width = mobile.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], "the page itself must not scroll sideways on a phone"

    # dark mode follows the system (prefers-color-scheme)
    dark = browser.new_context(viewport=LAPTOP, color_scheme="dark")
    dark.add_cookies(ctx.cookies())
    night = dark.new_page()
    night.goto(job_url)
    night.wait_for_selector("#log pre >> text=all-done")
    night.screenshot(path=shots / "job-dark-laptop.png", full_page=True)
    night.goto(f"{live_server.url}/cluster")
    night.screenshot(path=shots / "cluster-dark-laptop.png", full_page=True)
    dark.close()

    for job_id in (gpu_id, queued_id):
        live_server.http.post(f"/api/v1/jobs/{job_id}/cancel")
    phone.close()
    ctx.close()
