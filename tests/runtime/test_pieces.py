"""The runtime's pure pieces, without containers: env, OCI config, host root, exit reasons."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuyard.model import GpuDevice, TaskReason
from gpuyard.runtime.env import build_env
from gpuyard.runtime.errors import LaunchInvalid
from gpuyard.runtime.exits import (
    LOG_LINES,
    exit_reason,
    launch_failure_reason,
    runtime_errors,
    tail_lines,
    with_log,
)
from gpuyard.runtime.imageconfig import ImageConfig
from gpuyard.runtime.oci import CAPABILITIES, MAPPED_CAPABILITIES, build_config, hostname
from gpuyard.runtime.ociruntime import OciRuntime, release_exec_fifo, starts_in_process
from gpuyard.runtime.rootfs import HostRootfs, Rootfs
from gpuyard.runtime.taskdir import TaskDir, check_key, exit_from_json, exit_to_json
from gpuyard.runtime.types import TaskExit, TaskLaunch
from gpuyard.runtime.userns import ID_BLOCK, task_ids


def launch(**fields: object) -> TaskLaunch:
    values: dict[str, object] = {
        "key": "job-1-worker-0-a1", "job_id": "job-1", "job_name": "demo", "role": "worker",
        "index": 0, "attempt": 1, "command": "python train.py", "cpu": 2.5, "memory_mb": 4096,
    }
    values.update(fields)
    return TaskLaunch(**values)  # type: ignore[arg-type]


def env_of(task: TaskLaunch) -> dict[str, str]:
    return dict(item.split("=", 1) for item in build_env(task))


def test_platform_env_wins_over_the_users() -> None:
    gpus = (GpuDevice(3, "GPU-x", "A100", 81920, fake=True),)
    env = env_of(launch(gpus=gpus, env=(("CUDA_VISIBLE_DEVICES", "3"), ("HOME", "/h"),
                                        ("PAI_TASK_INDEX", "9"))))
    assert env["CUDA_VISIBLE_DEVICES"] == "0" and env["NVIDIA_VISIBLE_DEVICES"] == "GPU-x"
    assert env["PAI_TASK_INDEX"] == "0"
    assert env["HOME"] == "/h"  # a default, the user may change it


def test_a_later_attempt_is_told_it_resumes() -> None:
    assert env_of(launch())["GPUYARD_RESUMED"] == "0"
    resumed = env_of(launch(attempt=2, resumed=True))
    assert resumed["GPUYARD_RESUMED"] == "1" and resumed["GPUYARD_ATTEMPT"] == "2"


def test_role_counts_become_pai_variables() -> None:
    env = env_of(launch(role="ps-server", role_task_counts=(("ps-server", 2), ("worker", 4))))
    assert env["PAI_TASK_ROLE_TASK_COUNT_ps_server"] == "2"
    assert env["PAI_TASK_ROLE_TASK_COUNT_worker"] == "4"
    assert env["PAI_TASK_ROLE_LIST"] == "ps-server,worker"
    assert env_of(launch())["PAI_TASK_ROLE_LIST"] == "worker"


@pytest.mark.parametrize("bad", [("1X", "v"), ("A B", "v"), ("OK", "a\0b")])
def test_bad_user_env_is_refused(bad: tuple[str, str]) -> None:
    with pytest.raises(ValueError):
        build_env(launch(env=(bad,)))


def test_hostname() -> None:
    assert hostname("worker", 3) == "worker-3"
    assert hostname("PS_Server", 0) == "ps-server-0"
    assert len(hostname("r" * 100, 12)) == 63


def test_config_limits_namespaces_and_mounts(tmp_path: Path) -> None:
    task = launch(data_dir="/datasets/x", output_dir="/results/y", pids_limit=99)
    rootfs = Rootfs(tmp_path / "root", readonly=True, mounts=({"destination": "/usr"},))
    pinned = {"dataDir": "/pinned/data", "outputDir": "/pinned/output"}
    config = build_config(task, rootfs, tmp_path / "work", pinned=pinned)
    linux = config["linux"]
    assert linux["cgroupsPath"] == "/gpuyard/job-1-worker-0-a1"
    assert linux["resources"]["memory"]["limit"] == 4096 * 1024 * 1024
    assert linux["resources"]["memory"].get("swap", 4096 * 1024 * 1024) == 4096 * 1024 * 1024
    assert linux["resources"]["cpu"]["quota"] == 250_000
    assert linux["resources"]["cpu"]["period"] == 100_000
    assert linux["resources"]["pids"]["limit"] == 99
    assert {n["type"] for n in linux["namespaces"]} == {"pid", "mount", "uts", "ipc", "network"}
    mounts = {m["destination"]: m for m in config["mounts"]}
    assert "/sys/fs/cgroup" not in mounts and "/usr" in mounts
    # bound from what was pinned at launch, never from the spec's path
    assert "rro" in mounts["/data"]["options"] and mounts["/data"]["source"] == "/pinned/data"
    assert "rw" in mounts["/output"]["options"] and mounts["/output"]["source"] == "/pinned/output"
    # /workspace: a tmpfs of the task's quota (its memory limit by default), its user's own
    assert mounts["/workspace"]["type"] == "tmpfs"
    assert {"size=4096m", "mode=0700", "uid=0"} <= set(mounts["/workspace"]["options"])
    unlimited = build_config(launch(workspace_mb=0), rootfs, tmp_path / "work")
    on_disk = {m["destination"]: m for m in unlimited["mounts"]}["/workspace"]
    assert on_disk["source"] == str(tmp_path / "work")  # a tenant with no quota: the task dir's
    process = config["process"]
    assert process["args"] == ["/bin/sh", "-c", "python train.py"]
    assert process["cwd"] == "/workspace" and process["terminal"] is False
    assert process["noNewPrivileges"] is True
    assert config["root"] == {"path": str(tmp_path / "root"), "readonly": True}


BASE = 1 << 30


@pytest.mark.parametrize(
    ("image_user", "userns", "on_image", "expected"),
    [
        (None, True, True, (0, 0, BASE, BASE, BASE)),  # root in its namespace
        ((1000, 100), True, True, (1000, 100, BASE + 1000, BASE + 100, BASE)),  # image's USER
        (None, False, True, (BASE, BASE, BASE, BASE, None)),  # node without namespaces
        (None, True, False, (BASE, BASE, BASE, BASE, None)),  # host root: never mapped
        ((1000, 100), False, True, (BASE, BASE, BASE, BASE, None)),  # as before: tenant's uid
    ],
)
def test_task_ids(image_user, userns, on_image, expected) -> None:
    task = launch(run_as=(BASE, BASE), userns_base=BASE, image="x" if on_image else None)
    image = ImageConfig("x", user=image_user) if on_image else None
    ids = task_ids(task, image, userns)
    assert (ids.uid, ids.gid, ids.host_uid, ids.host_gid, ids.base) == expected


def test_an_image_user_outside_the_block_is_refused() -> None:
    task = launch(run_as=(BASE, BASE), userns_base=BASE, image="x")
    with pytest.raises(LaunchInvalid, match="below 65536"):
        task_ids(task, ImageConfig("x", user=(ID_BLOCK, 0)), True)


def test_a_mapped_task_gets_a_user_namespace_and_dockers_capabilities(tmp_path: Path) -> None:
    task = launch(run_as=(BASE, BASE), userns_base=BASE, image="x")
    rootfs = Rootfs(tmp_path / "root", readonly=False, image=ImageConfig("x", has_shell=True))
    mapped = build_config(task, rootfs, tmp_path / "w", ids=task_ids(task, rootfs.image, True))
    linux, process = mapped["linux"], mapped["process"]
    assert "user" in {n["type"] for n in linux["namespaces"]}
    assert linux["uidMappings"] == linux["gidMappings"] == [
        {"containerID": 0, "hostID": BASE, "size": ID_BLOCK}
    ]
    assert process["user"] == {"uid": 0, "gid": 0}
    assert process["capabilities"]["effective"] == MAPPED_CAPABILITIES
    assert "CAP_SYS_ADMIN" not in MAPPED_CAPABILITIES
    plain = build_config(task, rootfs, tmp_path / "w")  # no namespace: the tenant's uid, none
    assert "user" not in {n["type"] for n in plain["linux"]["namespaces"]}
    assert "uidMappings" not in plain["linux"] and plain["process"]["user"]["uid"] == BASE
    assert plain["process"]["capabilities"]["bounding"] == CAPABILITIES
    assert plain["process"]["capabilities"]["effective"] == []


def test_host_rootfs_mirrors_the_host_top_level(tmp_path: Path) -> None:
    host, skeleton = tmp_path / "host", tmp_path / "state" / "hostroot"
    for name in ("usr", "etc", "proc", "tmp", "lost+found", ".hidden", "home", "srv", "root/sw"):
        (host / name).mkdir(parents=True)
    (host / "bin").symlink_to("usr/bin")
    (host / "file.txt").write_text("x")
    (host / "etc" / "shadow").write_text("root:$6$hash")
    hidden = (host / "root" / "sw" / "state",)
    made = [HostRootfs(skeleton, hidden, host, extra=("/root/sw",)).prepare() for _ in range(2)]
    rootfs = made[0]
    assert rootfs == made[1]  # idempotent
    assert os.readlink(skeleton / "bin") == "usr/bin"
    binds = [m["destination"] for m in rootfs.mounts if m["type"] == "bind"]
    assert binds == ["/etc", "/usr", "/root/sw"]  # system dirs and the extra path: no home, srv
    assert all("rro" in m["options"] for m in rootfs.mounts if m["type"] == "bind")
    tmpfs = [m["destination"] for m in rootfs.mounts if m["type"] == "tmpfs"]
    assert tmpfs[:2] == ["/tmp", "/run"]
    assert tmpfs[2] == "/root/sw/state"  # the state dir is masked
    assert rootfs.masked == ("/etc/shadow",)
    assert {"proc", "dev", "tmp", "data", "output", "workspace"} <= set(os.listdir(skeleton))


@pytest.mark.parametrize(("code", "sig", "oom", "reason"), [
    (0, None, 0, TaskReason.COMPLETED),
    (0, None, 1, TaskReason.COMPLETED),  # a child was OOM-killed but the task recovered
    (137, 9, 1, TaskReason.OOM_KILLED),
    (137, None, 1, TaskReason.OOM_KILLED),
    (137, 9, 0, "Signal(SIGKILL)"),
    (143, None, 0, "Signal(SIGTERM)"),
    (127, None, 0, TaskReason.COMMAND_NOT_FOUND),
    (3, None, 0, "Error(exit 3)"),
    (255, None, 0, "Error(exit 255)"),
])
def test_exit_reasons(code: int, sig: int | None, oom: int, reason: str) -> None:
    assert exit_reason(code, sig, oom) == reason


def test_launch_failures() -> None:
    assert launch_failure_reason(
        'exec: "foo": executable file not found in $PATH') == TaskReason.COMMAND_NOT_FOUND
    assert launch_failure_reason(
        "executable file `/x` not found in $PATH: No such file") == TaskReason.COMMAND_NOT_FOUND
    assert launch_failure_reason("error mounting /x") == TaskReason.AGENT_ERROR


def test_runtime_errors_are_read_from_json_logs(tmp_path: Path) -> None:
    log = tmp_path / "runtime.log"
    log.write_text('{"level":"info","msg":"hello"}\n{"level":"error","msg":"boom"}\nraw line\n')
    assert runtime_errors(log) == "boom\nraw line"
    assert runtime_errors(tmp_path / "missing") == ""


def test_tail_lines_is_bounded(tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.write_text("".join(f"line {i}\n" for i in range(10_000)))
    assert tail_lines(log, 2) == "line 9998\nline 9999"
    assert tail_lines(log, 5, max_bytes=30).split("\n")[0] == "line 9997"  # whole lines only
    assert tail_lines(tmp_path / "missing") == ""
    assert with_log("failed", log).startswith("failed\n--- last lines of the log ---\nline")


def test_log_lines_always_follow_the_marker(tmp_path: Path) -> None:
    """The API cuts a message at `LOG_LINES` for who may not read the logs: a message that is
    only log lines starts with it too, and one without log lines has none."""
    log = tmp_path / "log"
    log.write_text("HF_TOKEN=x\nboom\n")
    assert with_log("", log) == f"{LOG_LINES}\nHF_TOKEN=x\nboom"
    assert with_log("notes", tmp_path / "missing") == "notes"


def test_keys_and_exit_files(tmp_path: Path) -> None:
    assert check_key("job-1_worker.0") == "job-1_worker.0"
    for bad in ("", ".", "..", "a/b", "a b", "x" * 129):
        with pytest.raises(ValueError):
            check_key(bad)
    exit_ = TaskExit(3, "Error(exit 3)", 12.5, "tail", stop_requested=True)
    assert exit_from_json(exit_to_json(exit_)) == exit_
    td = TaskDir(tmp_path)
    td.write_exit(exit_)
    assert td.read_exit() == exit_ and exit_from_json({"nope": 1}) is None


# --- starting a created crun container in process ---------------------------------------------


def test_release_exec_fifo_writes_one_byte_to_the_waiting_reader(tmp_path: Path) -> None:
    fifo = tmp_path / "exec.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # as crun's init holds it
    try:
        assert release_exec_fifo(fifo)
        assert os.read(reader, 8) == b"\0"
    finally:
        os.close(reader)
    assert not fifo.exists()  # as after `crun start`: the container reads as running


def test_release_exec_fifo_does_nothing_without_a_fifo_or_a_reader(tmp_path: Path) -> None:
    assert not release_exec_fifo(tmp_path / "missing")
    fifo = tmp_path / "exec.fifo"
    os.mkfifo(fifo)
    assert not release_exec_fifo(fifo)  # no init reading it (ENXIO): left for `<rt> start`
    assert fifo.exists()


@pytest.mark.parametrize(
    ("name", "hooks", "in_process"),
    [
        ("crun", None, True),
        ("crun", {"prestart": [{"path": "/bin/true"}]}, True),
        ("crun", {"poststart": [{"path": "/bin/true"}]}, False),  # only `crun start` runs it
        ("runc", None, False),  # runc's fifo goes the other way
    ],
)
def test_which_containers_start_in_process(
    name: str, hooks: dict[str, object] | None, in_process: bool
) -> None:
    rt = OciRuntime(name, f"/usr/bin/{name}", f"/run/gpuyard/{name}")
    config = {"hooks": hooks} if hooks else {}
    assert starts_in_process(rt, config) is in_process
    fifo = rt.exec_fifo("t-1")
    assert fifo == (Path("/run/gpuyard/crun/t-1/exec.fifo") if name == "crun" else None)
