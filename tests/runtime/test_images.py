"""Images for real: a busybox-static image built here (no network), imported with skopeo and
umoci, tasks on copy-on-write overlays under crun and runc, Docker's config semantics, missing
images as ImageError, `gpuyard image` commands, and LRU garbage collection."""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import shutil
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

import pytest

from gpuyard.model import TaskReason
from gpuyard.runtime.errors import ImageError
from gpuyard.runtime.executor import ContainerRuntime
from gpuyard.runtime.images import ImageStore
from gpuyard.runtime.overlay import mount_overlay, mounted_under

from .helpers import MakeLaunch, run_task, wait_exited, wait_running

pytestmark = pytest.mark.container
BUSYBOX = Path("/bin/busybox")
APPLETS = ("sh", "cat", "echo", "pwd", "test", "touch", "sleep", "ls", "id")


@pytest.fixture(scope="session")
def image_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A rootfs tarball, an OCI archive (with Env/WorkingDir) and a docker-archive."""
    for tool in ("umoci", "skopeo"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (make system)")
    if not BUSYBOX.exists():
        pytest.skip("busybox-static is not installed (make system)")
    base = tmp_path_factory.mktemp("image")
    root = base / "rootfs"
    (root / "bin").mkdir(parents=True)
    (root / "etc").mkdir()
    shutil.copy(BUSYBOX, root / "bin" / "busybox")
    for applet in APPLETS:
        (root / "bin" / applet).symlink_to("busybox")
    (root / "etc" / "marker").write_text("from-the-image\n")
    (root / "etc" / "passwd").write_text("root:x:0:0::/root:/bin/sh\napp:x:1234:4321::/:/bin/sh\n")
    rootfs_tar = base / "rootfs.tar"
    with tarfile.open(rootfs_tar, "w") as tar:
        tar.add(root, arcname=".")
    layout = f"{base / 'layout'}:cfg"
    for args in (["init", "--layout", str(base / "layout")], ["new", "--image", layout],
                 ["raw", "add-layer", "--image", layout, str(rootfs_tar)],
                 ["config", "--image", layout, "--config.env", "FROM_IMAGE=yes",
                  "--config.env", "NVIDIA_VISIBLE_DEVICES=all", "--config.env", "SHARED=image",
                  "--config.workingdir", "/srv/app", "--config.user", "app"]):
        subprocess.run(["umoci", *args], check=True, capture_output=True)
    oci_archive, docker_archive = base / "oci.tar", base / "docker.tar"
    for dest in (f"oci-archive:{oci_archive}", f"docker-archive:{docker_archive}:cfg:1"):
        subprocess.run(["skopeo", "copy", "--quiet", f"oci:{layout}", dest], check=True)
    bad = base / "corrupt.tar"
    bad.write_bytes(oci_archive.read_bytes()[:3000])
    return {"rootfs": rootfs_tar, "oci": oci_archive, "docker": docker_archive, "bad": bad}


def test_import_list_remove(image_files: dict[str, Path], tmp_path: Path) -> None:
    store = ImageStore(tmp_path / "node")
    a = store.import_file(image_files["rootfs"], "bb:1")
    b = store.import_file(image_files["oci"], "bb:cfg")
    c = store.import_file(image_files["docker"], "docker.io/x/bb")
    assert [i.name for i in store.list()] == ["bb:1", "bb:cfg", "docker.io/x/bb:latest"]
    assert all(i.digest.startswith("sha256:") and i.size > 0 for i in (a, b, c))
    with pytest.raises(ImageError, match="not a readable tar archive"):
        store.import_file(image_files["bad"], "bad:1")
    with pytest.raises(ImageError, match="cannot import .* as oci-archive"):
        store.import_file(image_files["bad"], "bad:1", "oci-archive")
    store.remove("bb:1")
    with pytest.raises(ImageError, match="no image bb:1"):
        store.remove("bb:1")
    assert [i.name for i in store.list()] == ["bb:cfg", "docker.io/x/bb:latest"]


@pytest.mark.parametrize("suffix", ["gz", "bz2", "xz"])
def test_a_compressed_rootfs_is_imported_decompressed(
    runtime: ContainerRuntime, make_launch: MakeLaunch, image_files: dict[str, Path],
    tmp_path: Path, suffix: str,
) -> None:
    """`umoci raw add-layer` stores a compressed tarball as a layer no unpack reads: the import
    decompresses it first, so a task on the image starts."""
    opener = {"gz": gzip.open, "bz2": bz2.open, "xz": lzma.open}[suffix]
    packed = tmp_path / f"rootfs.tar.{suffix}"
    with opener(packed, "wb") as out:
        out.write(image_files["rootfs"].read_bytes())
    runtime.images.import_file(packed, f"packed:{suffix}")
    launch = make_launch("cat /etc/marker", image=f"packed:{suffix}")
    ended = run_task(runtime, launch)
    assert ended.reason == TaskReason.COMPLETED, (ended, runtime.read_log(launch.key))
    assert runtime.read_log(launch.key) == b"from-the-image\n"
    assert not list(runtime.images.layout.parent.glob("import-*"))  # the copy is gone


def test_cli_import_ls_rm_pull(image_files: dict[str, Path], tmp_path: Path) -> None:
    def gy(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "gpuyard", "image", *args, "--data-dir", str(tmp_path)]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)

    assert gy("import", str(image_files["oci"]), "--name", "bb:cfg").returncode == 0
    listed = gy("ls").stdout
    assert "bb " in listed and "cfg" in listed
    bad = gy("import", str(image_files["bad"]), "--name", "bad:1")
    assert bad.returncode == 1 and "not a readable tar archive" in bad.stderr
    pulled = gy("pull", "localhost:1/nothing:1")
    assert pulled.returncode == 1 and "cannot pull localhost:1/nothing:1" in pulled.stderr
    assert gy("rm", "bb:cfg").returncode == 0 and "bb " not in gy("ls").stdout


def test_tasks_share_the_image_and_write_to_their_own_upper(
    runtime: ContainerRuntime, make_launch: MakeLaunch, image_files: dict[str, Path]
) -> None:
    runtime.images.import_file(image_files["rootfs"], "bb:1")
    first = make_launch(
        "cat /etc/marker; test ! -e /etc/os-release && echo no-os-release; "
        "echo mine > /written; cat /written", image="bb:1",
        workspace_mb=0,  # no quota: its upper layer in the task dir, to look at (diskquota.py)
    )
    assert run_task(runtime, first).reason == TaskReason.COMPLETED
    assert runtime.read_log(first.key) == b"from-the-image\nno-os-release\nmine\n"
    upper = runtime.task_dir(first.key).path / "upper"
    assert (upper / "written").read_text() == "mine\n"
    lower = runtime.images.resolve("bb:1").lower
    assert not (lower / "written").exists() and (lower / "etc" / "marker").exists()
    assert len(list(runtime.images.unpacked_dir.iterdir())) == 1  # unpacked once
    second = make_launch("test ! -e /written && echo clean", image="bb:1")
    assert run_task(runtime, second).reason == TaskReason.COMPLETED
    assert runtime.read_log(second.key) == b"clean\n"
    for key in (first.key, second.key):  # the supervisor unmounted; remove cleans the rest
        runtime.remove(key)
    assert mounted_under(runtime.tasks_dir) == []


def test_image_config_applies_as_in_docker(
    runtime: ContainerRuntime, make_launch: MakeLaunch, image_files: dict[str, Path]
) -> None:
    runtime.images.import_file(image_files["oci"], "bb:cfg")
    launch = make_launch(
        'pwd; id -u; echo "$FROM_IMAGE $SHARED $NVIDIA_VISIBLE_DEVICES $GPUYARD_TASK_ROLE"',
        image="bb:cfg", env=(("SHARED", "job"), ("GPUYARD_TASK_ROLE", "spoof")),
    )
    assert run_task(runtime, launch).reason == TaskReason.COMPLETED
    assert runtime.read_log(launch.key).decode().split("\n") == [
        "/srv/app", "1234", "yes job void worker", ""
    ]
    nobody = make_launch(
        "id -u; pwd", image="bb:cfg", run_as=(65534, 65534), data_dir=None, output_dir=None
    )
    assert run_task(runtime, nobody).reason == TaskReason.COMPLETED
    assert runtime.read_log(nobody.key) == b"65534\n/srv/app\n"  # the platform's user wins


def test_missing_image_is_an_image_error_at_once(
    runtime: ContainerRuntime, make_launch: MakeLaunch, tmp_path: Path
) -> None:
    began = time.monotonic()
    launch = make_launch("true", image="nowhere.invalid/missing:1")
    with pytest.raises(ImageError, match=r"'nowhere.invalid/missing:1' is not on this node"):
        runtime.start(launch)
    assert time.monotonic() - began < 2 and runtime.keys() == []
    # with pulling on, a missing image is pulled in the background: test_image_pulls.py
    empty = tmp_path / "empty.tar"
    with tarfile.open(empty, "w") as tar:
        info = tarfile.TarInfo("etc")
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
    runtime.images.import_file(empty, "noshell:1")
    noshell = make_launch("true", image="noshell:1")
    runtime.start(noshell)  # unpacked in the background, where the missing shell ends it
    exit_ = wait_exited(runtime, noshell.key)
    assert exit_.reason == TaskReason.IMAGE_ERROR and "no /bin/sh" in exit_.message
    runtime.remove(noshell.key)
    assert runtime.keys() == [] and mounted_under(runtime.tasks_dir) == []


def test_concurrent_starts_unpack_once(image_files: dict[str, Path], tmp_path: Path) -> None:
    store = ImageStore(tmp_path / "node")
    store.import_file(image_files["rootfs"], "bb:1")
    lowers: list[Path] = []
    threads = [threading.Thread(target=lambda: lowers.append(store.resolve("bb:1").lower))
               for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(lowers)) == 1 and len(lowers) == 6
    assert len(list(store.unpacked_dir.iterdir())) == 1


def test_gc_keeps_images_in_use(
    runtime: ContainerRuntime, make_launch: MakeLaunch, image_files: dict[str, Path]
) -> None:
    store = runtime.images
    store.import_file(image_files["rootfs"], "used:1")
    store.import_file(image_files["docker"], "idle:1")
    launch = make_launch("sleep 30", image="used:1")
    runtime.start(launch)
    wait_running(runtime, launch.key)
    store.recent_use_s = 0
    assert store.gc(budget_gb=0) == ["idle:1"]
    with pytest.raises(ImageError, match="used by a task"):
        store.remove("used:1")
    runtime.stop(launch.key, 0)
    wait_exited(runtime, launch.key)
    assert store.gc(budget_gb=0) == []  # the task dir still holds its upper dir
    runtime.remove(launch.key)
    assert store.gc(budget_gb=0) == ["used:1"] and store.list() == []
    assert list(store.unpacked_dir.iterdir()) == []


def test_stale_overlays_are_unmounted_when_a_node_starts(
    runtime: ContainerRuntime, make_launch: MakeLaunch, image_files: dict[str, Path]
) -> None:
    runtime.images.import_file(image_files["rootfs"], "bb:1")
    launch = make_launch("true", image="bb:1")
    run_task(runtime, launch)
    td = runtime.task_dir(launch.key).path
    mount_overlay(runtime.images.resolve("bb:1").lower, td)  # as a crash would leave it
    assert mounted_under(runtime.tasks_dir) == [td / "rootfs"]
    ContainerRuntime(runtime.state_root, runtime=runtime.name)
    assert mounted_under(runtime.tasks_dir) == []
    assert os.path.isdir(td / "upper")
