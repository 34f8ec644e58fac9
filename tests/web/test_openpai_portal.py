"""OpenPAI jobs in the portal: warnings shown while the spec is typed and recorded as events
when it is submitted; Clone gives the original OpenPAI document back."""

from __future__ import annotations

import yaml

from api.conftest import world  # noqa: F401 - the fixture
from web.test_routes import page, post

OPENPAI = """protocolVersion: 2
name: pai-from-the-portal
type: job
defaults: {virtualCluster: red}
prerequisites:
  - {name: img, type: dockerimage, uri: "busybox:1"}
taskRoles:
  main:
    dockerImage: img
    resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0}
    commands: [echo hi]
extras:
  hivedScheduler: {jobPriorityClass: crit}
"""


def test_warnings_while_typed_then_events_and_clone_gives_the_original(world):  # noqa: F811
    checked = post(world, "alice", "/submit/validate", {"spec": OPENPAI})
    assert "Valid" in checked.text and "extras.hivedScheduler.jobPriorityClass" in checked.text
    r = post(world, "alice", "/submit", {"spec": OPENPAI})
    assert r.status_code == 303, r.text
    job_id = r.headers["location"].rsplit("/", 1)[1]
    events = world.store.jobs.events(job_id)
    assert [e.message.split(":")[0] for e in events if e.reason == "SpecWarning"] == [
        "extras.hivedScheduler.jobPriorityClass"
    ]
    assert (
        "extras.hivedScheduler.jobPriorityClass"
        in page(world, "alice", "GET", f"/jobs/{job_id}").text
    )
    html = page(world, "alice", "GET", f"/submit?clone={job_id}").text
    assert "protocolVersion: 2" in html and "jobPriorityClass: crit" in html
    assert yaml.safe_load(OPENPAI) == world.store.jobs.get(job_id).original
