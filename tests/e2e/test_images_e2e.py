"""Images through the real server: `gpuyard image import` into its data dir, then a job on it
succeeds; a job on an unknown image fails at once with reason ImageError, never retried."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.container]
BUSYBOX = Path("/bin/busybox")


def busybox_rootfs_tar(base: Path) -> Path:
    root = base / "rootfs"
    (root / "bin").mkdir(parents=True)
    shutil.copy(BUSYBOX, root / "bin" / "busybox")
    for applet in ("sh", "cat", "echo"):
        (root / "bin" / applet).symlink_to("busybox")
    (root / "etc").mkdir()
    (root / "etc" / "marker").write_text("e2e-image\n")
    tar_path = base / "rootfs.tar"
    with tarfile.open(tar_path, "w") as tar:
        tar.add(root, arcname=".")
    return tar_path


def test_job_on_an_imported_image_and_on_a_missing_one(server, tmp_path):
    if not BUSYBOX.exists() or shutil.which("umoci") is None or shutil.which("skopeo") is None:
        pytest.skip("needs busybox-static, umoci and skopeo (make system)")
    image = busybox_rootfs_tar(tmp_path)
    imported = subprocess.run(
        [sys.executable, "-m", "gpuyard", "image", "import", str(image), "--name", "bb:e2e",
         "--data-dir", str(server.data_dir)],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert imported.returncode == 0, imported.stderr
    ok = server.wait(server.submit(
        "name: on-image\nimage: bb:e2e\nretryCount: 2\ntaskRoles:\n  main:\n"
        "    command: cat /etc/marker; test ! -e /etc/os-release\n"
    ))
    assert ok["state"] == "SUCCEEDED", ok
    assert "e2e-image" in server.logs(ok["id"])
    bad = server.wait(server.submit(
        "name: no-image\nimage: nowhere.invalid/none:1\nretryCount: 2\ntaskRoles:\n  main:\n"
        "    command: 'true'\n"
    ))
    assert bad["state"] == "FAILED" and bad["reason"] == "ImageError", bad
    assert bad["attempt"] == 1 and [t["reason"] for t in bad["tasks"]] == ["ImageError"]
