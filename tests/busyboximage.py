"""Small busybox images for tests on the real server: a rootfs tarball, imported into a
server's data dir with `gpuyard image import` (what a member would do)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

BUSYBOX = Path("/bin/busybox")


def busybox_tar(base: Path, applets: tuple[str, ...], files: dict[str, str]) -> Path:
    """`base/rootfs.tar`: busybox-static with `applets` linked in /bin, and `files`
    (path in the image → text)."""
    root = base / "rootfs"
    (root / "bin").mkdir(parents=True)
    shutil.copy(BUSYBOX, root / "bin" / "busybox")
    for applet in applets:
        (root / "bin" / applet).symlink_to("busybox")
    for name, text in files.items():
        path = root / name.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    tar_path = base / "rootfs.tar"
    with tarfile.open(tar_path, "w") as tar:
        tar.add(root, arcname=".")
    return tar_path


def import_image(server, tar_path: Path, name: str) -> None:
    """`gpuyard image import TAR --name NAME` into `server`'s data dir."""
    done = subprocess.run(
        [sys.executable, "-m", "gpuyard", "image", "import", str(tar_path), "--name", name,
         "--data-dir", str(server.data_dir)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, (name, done.stderr)
