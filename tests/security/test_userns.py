"""Root in the container, the tenant's uid on the host (runtime/userns.py), attacked through
real jobs on the real server: what the container's root may do (install, chown), what it may
not (ids outside its block, the shared image, another tenant's files), who on the host may
reach a task's mapped root, and an image whose working dir leads out through a link.

Before user namespaces a task of a tenant without `allowRoot` ran as the tenant's uid, not
root: OpenPAI configs that `apt-get install` or `pip install` system-wide failed (issue 18,
finding 8), and `allowRoot` meant host root.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import textwrap
from pathlib import Path

import pytest

from busyboximage import BUSYBOX, busybox_tar, import_image
from gpuyard.runtime.overlay import _make_workdir
from gpuyard.runtime.userns import mapped_roots
from security.helpers import make_tenant

APPLETS = ("sh", "cat", "echo", "id", "touch", "chown", "mkdir", "stat", "sleep", "ls", "mknod")
pytestmark = pytest.mark.skipif(
    not BUSYBOX.exists() or shutil.which("umoci") is None, reason="needs busybox and umoci"
)


def import_busybox(server, base: Path, name: str = "bb:userns") -> str:
    """A busybox image with /etc/marker in the server's store."""
    files = {"/etc/marker": "from-the-image\n", "/etc/passwd": "root:x:0:0:root:/root:/bin/sh\n"}
    import_image(server, busybox_tar(base, APPLETS, files), name)
    return name


def job(name: str, tenant: str, image: str, command: str, out: Path) -> str:
    body = textwrap.indent(command, " " * 6)
    return (
        f"name: {name}\ntenant: {tenant}\nimage: {image}\noutputDir: {out}\n"
        f"taskRoles:\n  main:\n    gpuNumber: 0\n    command: |\n{body}\n"
    )


def run(server, spec: str) -> tuple[dict, str]:
    done = server.wait(server.submit(spec), timeout=90)
    return done, server.logs(done["id"])


def test_root_in_the_container_is_the_tenants_uid_on_the_host(server, tmp_path):
    """The container's root installs and chowns inside its root, its files on the host are
    its tenant's block, ids outside the block are refused, and the image other tenants share
    is not what it wrote to."""
    image = import_busybox(server, tmp_path)
    t_root, a_root = tmp_path / "t-root", tmp_path / "a-root"
    t_uid, _ = make_tenant(server, "t", t_root), make_tenant(server, "a", a_root)
    script = (
        "id -u\n"
        "cat /proc/self/uid_map\n"
        "mkdir -p /opt/pkg && echo x > /opt/pkg/f && chown 42:42 /opt/pkg/f && echo chown-ok\n"
        "echo out > /output/by-root\n"
        "touch /output/by-42 && chown 42:42 /output/by-42\n"
        "chown 70000 /output/by-root 2>/dev/null || echo outside-refused\n"
        "mknod /opt/mem c 1 1 2>/dev/null || echo mknod-refused\n"
        "echo pwned > /etc/marker\n"
    )
    done, log = run(server, job("root", "t", image, script, t_root / "out"))
    assert done["state"] == "SUCCEEDED", (done, log)
    lines = log.split("\n")
    assert lines[0] == "0", log
    assert lines[1].split() == ["0", str(t_uid), "65536"], log
    for word in ("chown-ok", "outside-refused", "mknod-refused"):
        assert word in lines, log
    assert (t_root / "out" / "by-root").stat().st_uid == t_uid
    assert (t_root / "out" / "by-42").stat().st_uid == t_uid + 42
    # the image is shared: another tenant's task sees it as it was
    done, log = run(server, job("reader", "a", image, "cat /etc/marker", a_root / "out"))
    assert done["state"] == "SUCCEEDED" and log.strip() == "from-the-image", (done, log)


def test_no_host_user_reaches_a_running_tasks_mapped_root(server, tmp_path):
    """The task's root is mounted outside the node's private state dir (the container's root
    must walk to it), in a dir only its tenant's first id may enter: another tenant's uid
    and any other host user are refused; the dir goes with the task."""
    image = import_busybox(server, tmp_path)
    t_uid = make_tenant(server, "t", tmp_path / "t-root")
    a_uid = make_tenant(server, "a", tmp_path / "a-root")
    job_id = server.submit(job("sleeper", "t", image, "sleep 60", tmp_path / "t-root" / "o"))
    server.wait(job_id, {"RUNNING"})
    # this server's node only: other servers of the same test run map the same first block
    points = [p for p in mapped_roots(server.data_dir / "node") if p.parent.name == str(t_uid)]
    assert len(points) == 1 and (points[0] / "etc" / "marker").exists(), points
    st = points[0].parent.stat()
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (t_uid, 0o700)
    for uid in (a_uid, 54321):
        looked = subprocess.run(
            ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
             "cat", str(points[0] / "etc" / "marker")],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert looked.returncode != 0 and "Permission denied" in looked.stderr, looked
    assert server.http.post(f"/api/v1/jobs/{job_id}/cancel").status_code == 202
    server.wait(job_id)
    assert not points[0].exists()


def test_without_user_namespaces_tasks_run_as_the_tenants_uid(make_server, tmp_path,
                                                             monkeypatch):  # fmt: skip
    """A node admin may turn namespaces off (`GPUYARD_USERNS=0`): the tenant's uid, not root."""
    monkeypatch.setenv("GPUYARD_USERNS", "0")
    server = make_server()
    image = import_busybox(server, tmp_path)
    t_uid = make_tenant(server, "t", tmp_path / "t-root")
    script = "id -u\ntouch /etc/x 2>/dev/null || echo read-only-to-me\n"
    done, log = run(server, job("plain", "t", image, script, tmp_path / "t-root" / "o"))
    assert done["state"] == "SUCCEEDED", (done, log)
    assert log.split() == [str(t_uid), "read-only-to-me"], log


def test_an_images_working_dir_through_a_link_is_not_made_on_the_host(tmp_path):
    """An image (a member may import one) whose WorkingDir leads through a link: the node
    makes missing working dirs before the container exists, as root; it must not follow the
    image's link out of its root (it used to: `mkdir(parents=True)` on the joined path)."""
    root, outside = tmp_path / "root", tmp_path / "host-dir"
    root.mkdir()
    outside.mkdir()
    (root / "w").symlink_to(outside)
    (root / "up").symlink_to("..")
    for workdir in ("/w/made", "/up/up/made", "/../made"):
        _make_workdir(root, workdir, None)
    assert list(outside.iterdir()) == [] and not (tmp_path / "made").exists()
    _make_workdir(root, "/app/src", 1 << 30)  # a plain one is made, the container root's
    assert (root / "app" / "src").is_dir()
    assert {os.stat(root / p).st_uid for p in ("app", "app/src")} == {1 << 30}
