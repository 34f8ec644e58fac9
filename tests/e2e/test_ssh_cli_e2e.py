"""`gpuyard ssh` and OpenPAI's tensorboard plugin on the real server and a real container:
one server and one running OpenPAI job for the module (a busybox image with a stand-in
`tensorboard`, the ssh plugin with a user key made here, the tensorboard plugin).

- `gpuyard ssh JOB -- echo hi` answers `hi` through the platform (ProxyCommand `gpuyard
  ssh-proxy`, the port stream, the task's sshd on its loopback), with the user's own key;
- a member of another tenant is refused before any ssh runs (404, as for no job);
- the host key is checked strictly: the same ssh command line with a wrong known_hosts line
  fails, without a prompt;
- the tensorboard plugin's service answers through the platform (the stand-in serves its
  `--logdir` on `--port`, as TensorBoard would).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from e2e.conftest import Server
from e2e.test_services_e2e import make_user
from gpuyard.cli.fastssh import known_hosts_line, ssh_argv, ssh_parser
from tasknetworks import nodes_under, random_subnets, remove_node_network

pytestmark = [pytest.mark.e2e, pytest.mark.container]

BUSYBOX = Path("/bin/busybox")
APPLETS = ("sh", "sleep", "echo", "cat", "mkdir", "hostname", "id")
FAKE_TENSORBOARD = """#!/bin/sh
# a stand-in for TensorBoard: serves what it was given on --host:--port (busybox httpd)
while [ $# -gt 0 ]; do
  case $1 in --port) port=$2; shift;; --host) host=$2; shift;; --logdir) logdir=$2; shift;; esac
  shift
done
mkdir -p /dev/shm/tb && echo "fake-tensorboard logdir=$logdir" > /dev/shm/tb/index.html
exec busybox httpd -f -p "$host:$port" -h /dev/shm/tb
"""
JOB = """protocolVersion: 2
name: ssh-cli
type: job
prerequisites:
  - {{name: image, type: dockerimage, uri: "tb:e2e"}}
taskRoles:
  main:
    dockerImage: image
    resourcePerInstance: {{cpu: 0.5, memoryMB: 256, gpu: 0}}
    commands: [sleep 300]
extras:
  com.microsoft.pai.runtimeplugin:
    - plugin: ssh
      parameters:
        userssh: {{type: custom, value: "{key}"}}
    - plugin: tensorboard
      parameters: {{port: 6006, logdir: {{train: /workspace/tb}}}}
"""
QUIET = ["-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "LogLevel=ERROR"]


def image_tar(base: Path) -> Path:
    """A busybox rootfs whose PATH has the stand-in `tensorboard`."""
    root = base / "rootfs"
    (root / "bin").mkdir(parents=True)
    shutil.copy(BUSYBOX, root / "bin" / "busybox")
    for applet in APPLETS:
        (root / "bin" / applet).symlink_to("busybox")
    (root / "bin" / "tensorboard").write_text(FAKE_TENSORBOARD)
    (root / "bin" / "tensorboard").chmod(0o755)
    with tarfile.open(base / "rootfs.tar", "w") as tar:
        tar.add(root, arcname=".")
    return base / "rootfs.tar"


def user_key(base: Path) -> Path:
    key = base / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    return key


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str, Path]]:
    tools = [shutil.which(t) for t in ("umoci", "skopeo", "ssh", "ssh-keygen")]
    if not BUSYBOX.exists() or None in tools or not Path("/usr/sbin/dropbear").exists():
        pytest.skip("needs busybox-static, umoci, skopeo, dropbear and openssh-client")
    base = tmp_path_factory.mktemp("sshcli")
    subnet, network = random_subnets()  # as tests/e2e/test_exec_e2e.py
    with pytest.MonkeyPatch.context() as env:
        env.setenv("GPUYARD_TASK_SUBNET", subnet)
        env.setenv("GPUYARD_TASK_NETWORK", network)
        server = Server(base / "data", base / "server.log")
        server.start()
    try:
        imported = subprocess.run(
            [sys.executable, "-m", "gpuyard", "image", "import", str(image_tar(base)),
             "--name", "tb:e2e", "--data-dir", str(server.data_dir)],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert imported.returncode == 0, imported.stderr
        key = user_key(base)
        public = (base / "id_ed25519.pub").read_text().strip()
        job_id = server.submit(JOB.format(key=public))
        server.wait(job_id, {"RUNNING"})
        yield server, job_id, key
    finally:
        server.stop()
        for tag in nodes_under(base):
            remove_node_network(tag)


def gpuyard_ssh(server: Server, token: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GPUYARD_URL": server.url, "GPUYARD_TOKEN": token}
    return subprocess.run(
        [sys.executable, "-m", "gpuyard", "ssh", *args], env=env, capture_output=True,
        text=True, timeout=30, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def until_sshd_answers(server: Server, job_id: str, key: Path) -> subprocess.CompletedProcess:
    """The first ssh: the task is RUNNING a moment before its sshd listens."""
    for _ in range(20):
        done = gpuyard_ssh(server, server.token, job_id, "-i", str(key), *QUIET, "--", "echo",
                           "hi")  # fmt: skip
        if done.returncode == 0 or "nothing listens" not in done.stderr:
            return done
        time.sleep(0.5)
    return done


def test_ssh_runs_a_command_in_the_task_through_the_platform(running):
    server, job_id, key = running
    done = until_sshd_answers(server, job_id, key)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hi\n"
    done = gpuyard_ssh(server, server.token, job_id, "main/0", "-i", str(key), *QUIET, "--",
                       "sh", "-c", "'id -u; exit 7'")  # fmt: skip
    # the task's user: root in its user namespace (the default tenant's uid on the host)
    assert done.returncode == 7 and done.stdout.strip() == "0", done.stderr
    events = server.http.get(f"/api/v1/jobs/{job_id}/events").json()["events"]
    forwards = [e["message"] for e in events if e["reason"] == "PortForward"]
    assert forwards and all(m.startswith("admin connected to ssh (port ") for m in forwards)
    assert len(forwards) == 2  # one event per run of gpuyard ssh


def test_another_tenants_member_is_refused_before_ssh_runs(running):
    server, job_id, key = running
    assert server.http.post("/api/v1/tenants", json={"name": "team-b"}).status_code == 201
    bob = make_user(server, "bob", "team-b")
    done = gpuyard_ssh(server, str(bob.headers["Authorization"]).split()[1], job_id, "-i",
                       str(key), *QUIET, "--", "echo", "hi")  # fmt: skip
    assert done.returncode == 1 and done.stdout == "", done
    assert f"no job {job_id}" in done.stderr


def test_a_wrong_host_key_ends_the_connection_without_a_prompt(running, tmp_path):
    server, job_id, key = running
    target = server.http.get(f"/api/v1/jobs/{job_id}/ssh").json()
    assert target["hostKey"].startswith("ssh-ed25519 ")
    other = user_key(tmp_path).with_suffix(".pub").read_text().split()[:2]
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(known_hosts_line(job_id, {**target, "hostKey": " ".join(other)}))
    args = ssh_parser().parse_args([job_id, "-i", str(key), *QUIET])
    line = ssh_argv(args, server.url, target, known_hosts, ["echo", "hi"])
    env = {**os.environ, "GPUYARD_TOKEN": server.token, "SHELL": "/bin/sh"}
    done = subprocess.run(line, env=env, capture_output=True, text=True, timeout=30,
                          check=False, stdin=subprocess.DEVNULL)  # fmt: skip
    assert done.returncode == 255 and done.stdout == "", done
    assert "host key" in done.stderr.lower(), done.stderr
    known_hosts.write_text(known_hosts_line(job_id, target))  # the right one: it answers
    done = subprocess.run(line, env=env, capture_output=True, text=True, timeout=30,
                          check=False, stdin=subprocess.DEVNULL)  # fmt: skip
    assert done.returncode == 0 and done.stdout == "hi\n", done.stderr


def open_service(server: Server, path: str, tries: int = 40) -> httpx.Response:
    """The app starts listening a moment after the task runs: 502 until then."""
    for _ in range(tries):
        r = server.http.get(path)
        if r.status_code != 502:
            return r
        time.sleep(0.25)
    return r


def test_the_tensorboard_plugin_is_a_service_that_answers_through_the_platform(running):
    server, job_id, _ = running
    job = server.job(job_id)
    assert not [e for e in job["events"] if e["reason"] == "SpecWarning"], job["events"]
    r = open_service(server, f"/api/v1/jobs/{job_id}/services/tensorboard/")
    assert r.status_code == 200, r.text
    assert r.text.strip() == "fake-tensorboard logdir=/workspace/tb"
