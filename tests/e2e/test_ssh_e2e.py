"""OpenPAI's ssh plugin on the real server and real containers: a two-task job whose first
task runs a plain ssh loop to the second by its host name (`ssh worker-1 hostname`), with the
job's own keys, after the plugin's barrier; the second task's hostname comes back."""

from __future__ import annotations

import shutil

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.container]

JOB = """
protocolVersion: 2
name: ssh-e2e
type: job
taskRoles:
  worker:
    instances: 2
    completion: {minSucceededInstances: 1}
    resourcePerInstance: {cpu: 0.5, memoryMB: 256, gpu: 0}
    commands:
      - >-
        if [ "$PAI_TASK_INDEX" = 0 ]; then
        for host in worker-0 worker-1; do ssh $host 'echo reached $(hostname) $PAI_TASK_INDEX'; done;
        else sleep 60; fi
extras:
  com.microsoft.pai.runtimeplugin:
    - plugin: ssh
      parameters:
        jobssh: true
        sshbarrier: true
        sshbarrierTimeout: 1
        userssh: {type: custom, value: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBzaPRnBWml7tGWYMMxUcwIvw6LbXQzPR7YjIHzzJXgd me@laptop"}
"""


def test_a_task_reaches_its_sibling_by_host_name_over_ssh(server) -> None:
    if shutil.which("dropbear", path="/usr/sbin:/usr/bin") is None:
        pytest.skip("needs dropbear (make system)")
    job = server.wait(server.submit(JOB), timeout=90)
    log = server.logs(job["id"], task="worker/0")
    assert job["state"] == "SUCCEEDED", (job, log)
    assert log.splitlines() == ["reached worker-0 0", "reached worker-1 1"], log
    assert not [e for e in job["events"] if e["reason"] == "SpecWarning"]
