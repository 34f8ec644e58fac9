"""OpenPAI v2 jobs on the real server, on small local images (imported gzip-compressed): the
active deployment's pre and post commands and a cmd plugin's run around the role's commands,
OpenPAI's variables are set, each role runs its own image, a failing command ends the chain
with its exit code (no post commands), warnings are events and the original comes back, and
a config that installs a tool system-wide runs unchanged (root in its container, as there)."""

from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.e2e, pytest.mark.container]
BUSYBOX = Path("/bin/busybox")
APPLETS = ("sh", "cat", "echo", "env", "test", "false", "pwd", "mkdir", "printf", "chmod",
           "chown", "su", "stat", "touch")

JOB = """
protocolVersion: 2
name: pai-e2e
type: job
parameters: {greeting: hello}
prerequisites:
  - {name: first, type: dockerimage, uri: "bb:pai-one"}
  - {name: second, type: dockerimage, uri: "bb:pai-two"}
taskRoles:
  ps_server:
    instances: 1
    dockerImage: second
    resourcePerInstance: {cpu: 0.5, memoryMB: 128, gpu: 0}
    commands:
      - cat /etc/marker
  worker:
    instances: 2
    completion: {minFailedInstances: 1}
    dockerImage: first
    extraContainerOptions: {shmMB: 64}
    resourcePerInstance: {cpu: 0.5, memoryMB: 128, gpu: 0, ports: {grpc: 1}}
    commands:
      - echo "main <% $parameters.greeting %> $(cat /etc/marker)"
      - env | grep '^PAI_' | sort
deployments:
  - name: local
    taskRoles:
      worker:
        preCommands: [echo deploy-pre > data_marker, cat data_marker]
        postCommands: [echo deploy-post]
defaults:
  deployment: local
extras:
  com.microsoft.pai.runtimeplugin:
    - plugin: cmd
      taskroles: [worker]
      parameters:
        preCommands: [echo plugin-pre]
        postCommands: [echo plugin-post]
    - plugin: ssh
      parameters: {jobssh: true}
"""

FAILING = """
protocolVersion: 2
name: pai-e2e-fails
type: job
prerequisites:
  - {name: first, type: dockerimage, uri: "bb:pai-one"}
taskRoles:
  main:
    dockerImage: first
    resourcePerInstance: {cpu: 0.5, memoryMB: 128, gpu: 0}
    commands: [echo before, sh -c 'exit 3', echo never-main]
deployments:
  - name: local
    taskRoles:
      main: {postCommands: [echo never-post]}
defaults:
  deployment: local
"""

INSTALLS = """
protocolVersion: 2
name: pai-installs
type: job
prerequisites:
  - {name: img, type: dockerimage, uri: "bb:pai-one"}
taskRoles:
  main:
    dockerImage: img
    resourcePerInstance: {cpu: 0.5, memoryMB: 128, gpu: 0}
    commands:
      - mkdir -p /usr/local/bin /opt/tool
      - printf '#!/bin/sh\\necho tool-ran\\n' > /usr/local/bin/tool
      - chmod 755 /usr/local/bin/tool
      - echo 'svc:x:100:100::/opt/tool:/bin/sh' >> /etc/passwd
      - echo 'svc:x:100:' >> /etc/group
      - chown -R svc:svc /opt/tool
      - su svc -s /bin/sh -c 'touch /opt/tool/by-svc'
      - stat -c '%U %u' /opt/tool/by-svc
      - tool
"""


def import_image(server, base: Path, name: str, marker: str) -> None:
    """A busybox rootfs as a gzip-compressed tarball, imported as `name`."""
    root = base / name.replace(":", "-")
    (root / "bin").mkdir(parents=True)
    shutil.copy(BUSYBOX, root / "bin" / "busybox")
    for applet in (*APPLETS, "grep", "sort"):
        (root / "bin" / applet).symlink_to("busybox")
    (root / "etc").mkdir()
    (root / "etc" / "marker").write_text(f"{marker}\n")
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (root / "etc" / "group").write_text("root:x:0:\n")
    packed = base / f"{root.name}.tar.gz"
    with gzip.open(packed, "wb") as raw, tarfile.open(fileobj=raw, mode="w") as tar:
        tar.add(root, arcname=".")
    done = subprocess.run(
        [sys.executable, "-m", "gpuyard", "image", "import", str(packed), "--name", name,
         "--data-dir", str(server.data_dir)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


@pytest.fixture
def images(server, tmp_path):
    if not BUSYBOX.exists() or shutil.which("umoci") is None or shutil.which("skopeo") is None:
        pytest.skip("needs busybox-static, umoci and skopeo (make system)")
    import_image(server, tmp_path, "bb:pai-one", "image-one")
    import_image(server, tmp_path, "bb:pai-two", "image-two")
    return server


def variables(log: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in log.splitlines() if line.startswith("PAI_"))


def test_a_deployment_and_a_cmd_plugin_run_around_the_commands(images):
    server = images
    job = server.wait(server.submit(JOB), timeout=90)
    assert job["state"] == "SUCCEEDED", job
    log = server.logs(job["id"], task="worker/1")
    lines = [line for line in log.splitlines() if not line.startswith("PAI_")]
    assert lines == [
        "plugin-pre", "deploy-pre", "main hello image-one", "deploy-post", "plugin-post",
    ], log  # fmt: skip
    assert server.logs(job["id"], task="ps_server/0").splitlines() == ["image-two"]
    env = variables(log)
    assert env["PAI_WORK_DIR"] == "/workspace"
    assert env["PAI_USER_NAME"] == job["owner"] and job["owner"]
    workers = env["PAI_TASK_ROLE_worker_HOST_LIST"].split(",")
    assert len(workers) == 2 and all(":" in w for w in workers), workers
    assert len(env["PAI_TASK_ROLE_ps_server_HOST_LIST"].split(",")) == 1
    assert env["PAI_CONTAINER_HOST_grpc_PORT_LIST"].isdigit()
    assert env["PAI_CONTAINER_HOST_IP"] + ":" + env["PAI_CONTAINER_HOST_PORT"] == workers[1]
    assert env["PAI_RESOURCE_worker"] == "0,0.5,128,128"
    assert env["PAI_MIN_FAILED_TASK_COUNT_worker"] == "1"
    assert env["PAI_MIN_SUCCEEDED_TASK_COUNT_worker"] == "2"
    # the ssh plugin runs (sshd from the node's kit, in images without one): no warning
    assert not [e for e in job["events"] if e["reason"] == "SpecWarning"]
    original = server.http.get(f"/api/v1/jobs/{job['id']}/original").json()
    assert original == {"format": "openpai", "document": yaml.safe_load(JOB)}


def test_a_failing_command_ends_the_chain_with_its_exit_code(images):
    server = images
    job = server.wait(server.submit(FAILING), timeout=60)
    assert job["state"] == "FAILED", job
    assert [t["exitCode"] for t in job["tasks"]] == [3], job["tasks"]
    log = server.logs(job["id"])
    assert "before" in log and "never" not in log, log


def test_a_config_that_installs_system_wide_runs_unchanged(images):
    """OpenPAI containers run as root, and ~33 of its examples `apt-get install` or `pip
    install` system-wide: here too the commands write /usr/local and /etc, add a user, chown
    to it and switch to it (root in the task's user namespace, the tenant's uid on the host:
    runtime.md, Identity)."""
    server = images
    job = server.wait(server.submit(INSTALLS), timeout=60)
    log = server.logs(job["id"])
    assert job["state"] == "SUCCEEDED", (job, log)
    assert log.splitlines() == ["svc 100", "tool-ran"], log
