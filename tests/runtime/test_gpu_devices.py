"""Real GPUs in containers, with `mknod`-made device nodes and a CDI spec written here.

The node declares two "real" GPUs (minor 0 and 1) whose nodes live in a tmp dev root; the task
gets GPU 1. Numbers: nvidia1 and nvidiactl are /dev/null's (1:3), so they open and swallow
writes; nvidia-uvm(-tools) are 511:0/1 and nvidia0 is 195:0, majors with no driver here. So
from inside the container an allowed node without a driver fails with ENXIO ("No such device
or address") and a node that the device cgroup denies fails with EPERM ("Operation not
permitted"): the image carries its own node for nvidia0 (the escape the cgroup must stop).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tarfile
from pathlib import Path

import pytest

from gpuyard.model import GpuDevice, TaskReason
from gpuyard.runtime.env import build_env
from gpuyard.runtime.errors import RuntimeStartError
from gpuyard.runtime.executor import ContainerRuntime
from gpuyard.runtime.gpusetup import DriverMode, GpuSetup, apply_gpu_setup
from gpuyard.runtime.oci import build_config
from gpuyard.runtime.rootfs import Rootfs
from gpuyard.runtime.types import TaskLaunch

from .helpers import MakeLaunch, run_task

BUSYBOX = Path("/bin/busybox")
APPLETS = ("sh", "cat", "echo", "ls", "env")
GPUS = (
    GpuDevice(0, "GPU-0a0a0a0a-0000", "A100-80GB", 81920, fake=False, minor=0),
    GpuDevice(1, "GPU-1b1b1b1b-1111", "A100-80GB", 81920, fake=False, minor=1),
)
NODES = {
    "nvidia0": (195, 0),
    "nvidia1": (1, 3),
    "nvidiactl": (1, 3),
    "nvidia-uvm": (511, 0),
    "nvidia-uvm-tools": (511, 1),
}
PROBES = ("/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia0", "/escape/nvidia0")
PROBE_SCRIPT = (
    "ls /dev > /output/devs; for f in " + " ".join(PROBES) + '; do if [ ! -e $f ];'
    ' then echo "$f: missing"; elif sh -c "echo x > $f && cat $f" 2>/output/err;'
    ' then echo "$f: ok"; else echo "$f: $(cat /output/err)"; fi; done > /output/probe;'
    " env > /output/env; cat /usr/lib/fake-nvidia/libcuda.so.1 > /output/lib"
)
ENXIO, EPERM = "No such device or address", "Operation not permitted"


def mknod(path: Path, major: int, minor: int) -> None:
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    os.chmod(path, 0o666)


@pytest.fixture
def dev_root(tmp_path: Path) -> Path:
    if os.geteuid() != 0:
        pytest.skip("mknod needs root")
    root = tmp_path / "dev"
    root.mkdir()
    for name, (major, minor) in NODES.items():
        mknod(root / name, major, minor)
    return root


def cdi_spec(dev_root: Path, lib_dir: Path) -> dict[str, object]:
    """What `nvidia-ctk cdi generate` writes, in small: names by index and UUID, common edits."""
    def gpu(minor: int, env: list[str]) -> dict[str, object]:
        node = {"path": f"/dev/nvidia{minor}", "hostPath": str(dev_root / f"nvidia{minor}")}
        return {"deviceNodes": [node], "env": env}

    common_nodes = ["nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"]
    return {
        "cdiVersion": "0.5.0",
        "kind": "nvidia.com/gpu",
        "devices": [
            {"name": "0", "containerEdits": gpu(0, ["GPU_ZERO=yes"])},
            {"name": "1", "containerEdits": gpu(1, ["GPU_ONE=by-index"])},
            {"name": GPUS[1].uuid, "containerEdits": gpu(1, ["GPU_ONE=by-uuid"])},
            {"name": "all", "containerEdits": {"deviceNodes": [
                {"path": f"/dev/nvidia{m}", "hostPath": str(dev_root / f"nvidia{m}")}
                for m in (0, 1)]}},
        ],
        "containerEdits": {
            "env": ["NVIDIA_VISIBLE_DEVICES=void", "FAKE_DRIVER=550.54.15"],
            "deviceNodes": [
                {"path": f"/dev/{n}", "hostPath": str(dev_root / n)} for n in common_nodes
            ],
            "mounts": [{"hostPath": str(lib_dir), "containerPath": "/usr/lib/fake-nvidia",
                        "options": ["ro", "nosuid", "nodev", "bind"]}],
        },
    }


@pytest.fixture
def cdi_dir(tmp_path: Path, dev_root: Path) -> Path:
    lib_dir = tmp_path / "driver-lib"
    lib_dir.mkdir()
    (lib_dir / "libcuda.so.1").write_text("fake libcuda\n")
    cdi = tmp_path / "cdi"
    cdi.mkdir()
    (cdi / "nvidia.json").write_text(json.dumps(cdi_spec(dev_root, lib_dir)))
    return cdi


@pytest.fixture(scope="module")
def gpu_image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An OCI archive: busybox, Env NVIDIA_VISIBLE_DEVICES=all, its own node for nvidia0."""
    if os.geteuid() != 0 or not BUSYBOX.exists():
        pytest.skip("needs root and busybox-static")
    for tool in ("umoci", "skopeo"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (make system)")
    base = tmp_path_factory.mktemp("gpu-image")
    root = base / "rootfs"
    (root / "bin").mkdir(parents=True)
    (root / "escape").mkdir()
    shutil.copy(BUSYBOX, root / "bin" / "busybox")
    for applet in APPLETS:
        (root / "bin" / applet).symlink_to("busybox")
    mknod(root / "escape" / "nvidia0", *NODES["nvidia0"])
    with tarfile.open(base / "rootfs.tar", "w") as tar:
        tar.add(root, arcname=".")
    layout = f"{base / 'layout'}:gpu"
    for args in (["init", "--layout", str(base / "layout")], ["new", "--image", layout],
                 ["raw", "add-layer", "--image", layout, str(base / "rootfs.tar")],
                 ["config", "--image", layout, "--config.env", "NVIDIA_VISIBLE_DEVICES=all",
                  "--config.env", "NVIDIA_DRIVER_CAPABILITIES=compute,utility,video"]):
        subprocess.run(["umoci", *args], check=True, capture_output=True)
    archive = base / "gpu.tar"
    subprocess.run(["skopeo", "copy", "--quiet", f"oci:{layout}", f"oci-archive:{archive}"],
                   check=True)
    return archive


def read_env(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def probes(path: Path) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in path.read_text().splitlines())


def task_json(rt: ContainerRuntime, key: str) -> dict[str, object]:
    return json.loads(rt.task_dir(key).task.read_text())


# --- real containers -----------------------------------------------------------------------


@pytest.mark.container
def test_task_sees_only_its_gpu_and_the_cdi_edits(
    runtime: ContainerRuntime, make_launch: MakeLaunch, tmp_path: Path, dev_root: Path,
    cdi_dir: Path, gpu_image: Path,
) -> None:
    runtime.gpu_setup = GpuSetup(dev_root=dev_root, cdi_dirs=(cdi_dir,), hook=None)
    runtime.images.import_file(gpu_image, "gpu:1")
    launch = make_launch(PROBE_SCRIPT, gpus=(GPUS[1],), image="gpu:1")
    exit_ = run_task(runtime, launch)
    assert exit_.reason == TaskReason.COMPLETED, exit_.message
    out = tmp_path / "output"
    seen = probes(out / "probe")
    assert seen["/dev/nvidia1"] == "ok" and seen["/dev/nvidiactl"] == "ok", seen
    assert ENXIO in seen["/dev/nvidia-uvm"], seen  # allowed by the cgroup; no driver here
    assert seen["/dev/nvidia0"] == "missing", seen  # the other GPU's node is not there
    assert EPERM in seen["/escape/nvidia0"], seen  # nor openable through the image's node
    devs = set((out / "devs").read_text().split())
    assert {"nvidia1", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"} <= devs
    assert "nvidia0" not in devs and "nvidia-modeset" not in devs
    env = read_env(out / "env")
    assert env["NVIDIA_VISIBLE_DEVICES"] == GPUS[1].uuid  # not the image's all, nor CDI's void
    assert env["CUDA_VISIBLE_DEVICES"] == "0"
    assert env["FAKE_DRIVER"] == "550.54.15" and env["GPU_ONE"] == "by-uuid"
    assert "GPU_ZERO" not in env
    assert env["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility,video"  # the image's
    assert (out / "lib").read_text() == "fake libcuda\n"
    assert task_json(runtime, launch.key)["gpuDriver"] == DriverMode.CDI


@pytest.mark.container
def test_toolkit_hook_without_cdi(
    runtime: ContainerRuntime, make_launch: MakeLaunch, tmp_path: Path, dev_root: Path,
    gpu_image: Path,
) -> None:
    hook = tmp_path / "hooks" / "nvidia-container-runtime-hook"
    hook.parent.mkdir()
    hook.write_text('#!/bin/sh\ncat > "$0.state"; env > "$0.env"; echo "$@" > "$0.args"\n')
    hook.chmod(0o755)
    runtime.gpu_setup = GpuSetup(dev_root=dev_root, cdi_dirs=(tmp_path / "no-cdi",),
                                 hook=str(hook))
    runtime.images.import_file(gpu_image, "gpu:1")
    launch = make_launch("ls /dev > /output/devs; env > /output/env", gpus=(GPUS[1],),
                         image="gpu:1", env=(("NVIDIA_DRIVER_CAPABILITIES", "compute,video"),))
    exit_ = run_task(runtime, launch)
    assert exit_.reason == TaskReason.COMPLETED, exit_.message
    assert json.loads(Path(f"{hook}.state").read_text())["id"] == launch.key
    assert Path(f"{hook}.args").read_text().split() == ["prestart"]
    hook_env = read_env(Path(f"{hook}.env"))
    assert hook_env["NVIDIA_VISIBLE_DEVICES"] == GPUS[1].uuid
    assert hook_env["NVIDIA_DRIVER_CAPABILITIES"] == "compute,video"  # the job's
    assert read_env(tmp_path / "output" / "env")["NVIDIA_DRIVER_CAPABILITIES"] == "compute,video"
    devs = set((tmp_path / "output" / "devs").read_text().split())
    assert "nvidia1" in devs and "nvidia0" not in devs
    assert task_json(runtime, launch.key)["gpuDriver"] == DriverMode.HOOK


@pytest.mark.container
def test_a_poststart_hook_runs_so_the_container_is_started_by_the_runtime(
    runtime: ContainerRuntime, make_launch: MakeLaunch, tmp_path: Path, dev_root: Path,
    cdi_dir: Path, gpu_image: Path,
) -> None:
    """A CDI spec's `poststart` hook is run by `<rt> start` only: such a task is never started
    in process (through crun's exec fifo), and the hook runs."""
    marker = tmp_path / "poststart.ran"
    spec_file = cdi_dir / "nvidia.json"
    spec = json.loads(spec_file.read_text())
    spec["containerEdits"]["hooks"] = [
        {"hookName": "poststart", "path": "/bin/sh", "args": ["sh", "-c", f"cat > {marker}"]}
    ]
    spec_file.write_text(json.dumps(spec))
    runtime.gpu_setup = GpuSetup(dev_root=dev_root, cdi_dirs=(cdi_dir,), hook=None)
    runtime.images.import_file(gpu_image, "gpu:1")
    launch = make_launch("true", gpus=(GPUS[1],), image="gpu:1")
    exit_ = run_task(runtime, launch)
    assert exit_.reason == TaskReason.COMPLETED, exit_.message
    assert task_json(runtime, launch.key)["startInProcess"] is False
    assert json.loads(marker.read_text())["id"] == launch.key  # the hook got the state


@pytest.mark.container
def test_host_root_task_gets_its_nodes_and_no_driver_edits(
    runtime: ContainerRuntime, make_launch: MakeLaunch, tmp_path: Path, dev_root: Path,
    cdi_dir: Path,
) -> None:
    """Without an image the host's libraries are in the (read-only) root: no CDI edits."""
    runtime.gpu_setup = GpuSetup(dev_root=dev_root, cdi_dirs=(cdi_dir,), hook=None)
    launch = make_launch("ls /dev > /output/devs; env > /output/env", gpus=(GPUS[1],))
    exit_ = run_task(runtime, launch)
    assert exit_.reason == TaskReason.COMPLETED, exit_.message
    devs = set((tmp_path / "output" / "devs").read_text().split())
    assert {"nvidia1", "nvidiactl", "nvidia-uvm"} <= devs and "nvidia0" not in devs
    assert "FAKE_DRIVER" not in read_env(tmp_path / "output" / "env")
    assert task_json(runtime, launch.key)["gpuDriver"] == DriverMode.HOST_ROOT


# --- the OCI config alone ------------------------------------------------------------------


def config_for(launch: TaskLaunch, tmp_path: Path) -> dict[str, object]:
    return build_config(launch, Rootfs(tmp_path, readonly=True), tmp_path / "work")


def gpu_launch(gpus: tuple[GpuDevice, ...], **fields: object) -> TaskLaunch:
    return TaskLaunch("k1", "j", "job", "w", 0, 1, "true", 1.0, 256, gpus=gpus, **fields)


def test_allow_list_holds_exactly_the_task_nodes(
    tmp_path: Path, dev_root: Path, cdi_dir: Path
) -> None:
    config = config_for(gpu_launch((GPUS[1],)), tmp_path)
    mode = apply_gpu_setup(config, (GPUS[1],), GpuSetup(dev_root, (cdi_dir,), None))
    assert mode == DriverMode.CDI
    linux = config["linux"]
    assert isinstance(linux, dict)
    rules = linux["resources"]["devices"]
    assert rules[0] == {"allow": False, "access": "rwm"}
    numbers = {(r.get("major"), r.get("minor")) for r in rules[1:]}
    assert numbers == {(1, 3), (1, 5), (1, 7), (1, 8), (1, 9), (5, 0), (5, 1), (5, 2),
                       (136, None), (511, 0), (511, 1)}
    paths = [d["path"] for d in linux["devices"]]
    assert sorted(paths) == ["/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia1",
                             "/dev/nvidiactl"]  # CDI re-adds them: replaced, never doubled


def test_fake_gpus_get_no_devices(tmp_path: Path, dev_root: Path) -> None:
    fake = GpuDevice(1, "GPU-fake-n-0001", "A100-80GB", 81920, fake=True)
    config = config_for(gpu_launch((fake,)), tmp_path)
    before = json.dumps(config, sort_keys=True)
    assert apply_gpu_setup(config, (fake,), GpuSetup(dev_root, (), None)) == DriverMode.NONE
    assert json.dumps(config, sort_keys=True) == before


def test_without_cdi_or_hook_only_the_nodes(tmp_path: Path, dev_root: Path) -> None:
    config = config_for(gpu_launch((GPUS[0],)), tmp_path)
    mode = apply_gpu_setup(config, (GPUS[0],), GpuSetup(dev_root, (tmp_path / "none",), None))
    assert mode == DriverMode.DEVICES_ONLY
    assert "hooks" not in config
    linux = config["linux"]
    assert isinstance(linux, dict)
    assert [d["path"] for d in linux["devices"]][0] == "/dev/nvidia0"


def test_cdi_by_index_and_other_gpus_nodes_left_out(tmp_path: Path, dev_root: Path) -> None:
    """A spec without UUID names is found by index; its nodes of another GPU never come in."""
    spec = cdi_spec(dev_root, tmp_path)
    spec["devices"] = [
        {"name": "1", "containerEdits": {"deviceNodes": [
            {"path": "/dev/nvidia1", "hostPath": str(dev_root / "nvidia1")},
            {"path": "/dev/nvidia0", "hostPath": str(dev_root / "nvidia0")}]}},
    ]
    (tmp_path / "cdi").mkdir()
    (tmp_path / "cdi" / "nvidia.yaml").write_text(json.dumps(spec))  # JSON is YAML too
    config = config_for(gpu_launch((GPUS[1],)), tmp_path)
    apply_gpu_setup(config, (GPUS[1],), GpuSetup(dev_root, (tmp_path / "cdi",), None))
    linux = config["linux"]
    assert isinstance(linux, dict)
    assert "/dev/nvidia0" not in [d["path"] for d in linux["devices"]]
    assert {"major": 195, "minor": 0} not in [
        {"major": r.get("major"), "minor": r.get("minor")} for r in linux["resources"]["devices"]
    ]


def test_stale_cdi_spec_and_missing_node_refuse_the_start(
    tmp_path: Path, dev_root: Path, cdi_dir: Path
) -> None:
    other = GpuDevice(7, "GPU-7777", "A100-80GB", 81920, fake=False, minor=1)
    config = config_for(gpu_launch((other,)), tmp_path)
    spec = json.loads((cdi_dir / "nvidia.json").read_text())
    spec["devices"] = [d for d in spec["devices"] if d["name"] == "0"]
    (cdi_dir / "nvidia.json").write_text(json.dumps(spec))
    with pytest.raises(RuntimeStartError, match="regenerate it with `nvidia-ctk cdi generate`"):
        apply_gpu_setup(config, (other,), GpuSetup(dev_root, (cdi_dir,), None))
    lost = GpuDevice(3, "GPU-3333", "A100-80GB", 81920, fake=False, minor=3)
    with pytest.raises(RuntimeStartError, match="nvidia3 is missing"):
        apply_gpu_setup(config, (lost,), GpuSetup(dev_root, (), None))


def test_driver_capabilities_default_and_check() -> None:
    env = dict(e.split("=", 1) for e in build_env(gpu_launch((GPUS[0],))))
    assert env["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"
    assert "NVIDIA_DRIVER_CAPABILITIES" not in dict(
        e.split("=", 1) for e in build_env(gpu_launch(()))
    )
    image_env = (("NVIDIA_DRIVER_CAPABILITIES", "all"),)
    env = dict(e.split("=", 1) for e in build_env(gpu_launch((GPUS[0],)), image_env))
    assert env["NVIDIA_DRIVER_CAPABILITIES"] == "all"
    bad = gpu_launch((GPUS[0],), env=(("NVIDIA_DRIVER_CAPABILITIES", "compute,gaming"),))
    with pytest.raises(ValueError, match="unknown NVIDIA_DRIVER_CAPABILITIES gaming"):
        build_env(bad)
