"""local_node and the CPU and memory limits it reads from /proc and cgroups."""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path

import pytest

from gpuyard.runtime.node import (
    available_cpus,
    available_memory_mb,
    cgroup_cpu_limit,
    cgroup_memory_limit_mb,
    local_node,
    meminfo_total_mb,
)

GIB = 1024**3
AFFINITY = len(os.sched_getaffinity(0))


def mem_total_mb() -> int:
    text = Path("/proc/meminfo").read_text()
    return int(re.search(r"^MemTotal:\s+(\d+)", text, re.MULTILINE)[1]) // 1024


def test_local_node_has_sane_numbers():
    node = local_node(fake_gpus="1xT4")
    assert node.name == socket.gethostname()
    assert 0 < node.cpu_milli <= AFFINITY * 1000
    assert 0 < node.memory_mb <= mem_total_mb()
    assert node.schedulable


def test_local_node_with_fake_gpus():
    node = local_node(name="n1", fake_gpus="2xA100-80GB,1xV100")
    assert node.name == "n1"
    assert [(g.index, g.type, g.fake) for g in node.gpus] == [
        (0, "A100-80GB", True),
        (1, "A100-80GB", True),
        (2, "V100", True),
    ]
    assert node.gpus[0].uuid == "GPU-fake-n1-0000"
    assert node.capacity.gpus == 3


def test_local_node_subtracts_reserves():
    full = local_node(name="n1", fake_gpus="1xT4")
    reserved = local_node(name="n1", fake_gpus="1xT4", reserve_cpu=0.5, reserve_memory_mb=256)
    assert reserved.cpu_milli == full.cpu_milli - 500
    assert reserved.memory_mb == full.memory_mb - 256


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"reserve_cpu": -1}, "must not be negative"),
        ({"reserve_memory_mb": -1}, "must not be negative"),
        ({"reserve_cpu": 100_000}, "leaves no CPU"),
        ({"reserve_memory_mb": 1 << 40}, "leaves no memory"),
    ],
)
def test_local_node_rejects_bad_reserves(kwargs, message):
    with pytest.raises(ValueError, match=message):
        local_node(fake_gpus="1xT4", **kwargs)


def test_local_node_rejects_bad_fake_gpus():
    with pytest.raises(ValueError, match="expected COUNTxTYPE"):
        local_node(fake_gpus="lots of A100s")


def test_this_machine_reads_without_errors():
    assert 0 < available_cpus() <= AFFINITY
    assert 0 < available_memory_mb() <= meminfo_total_mb() == mem_total_mb()


# A directory laid out like /proc, with cgroup hierarchies mounted (by mountinfo) beneath it.


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def mountinfo_line(n: int, root: str, mount_point: Path, fstype: str, options: str) -> str:
    escaped = str(mount_point).replace(" ", "\\040")
    return f"{n} 1 0:{n} {root} {escaped} rw,relatime shared:{n} - {fstype} {fstype} {options}\n"


def fake_proc(tmp_path: Path, cgroup: str, mounts: list[tuple[str, str, str, str]]) -> Path:
    """mounts: (root, directory name under tmp_path, fstype, super options)."""
    proc = tmp_path / "proc"
    write(proc / "meminfo", "MemTotal:        8388608 kB\nMemFree:         1024 kB\n")
    write(proc / "self" / "cgroup", cgroup)
    lines = "22 1 0:20 / /proc rw - proc proc rw\n"
    for n, (root, name, fstype, options) in enumerate(mounts, start=30):
        (tmp_path / name).mkdir(parents=True, exist_ok=True)
        lines += mountinfo_line(n, root, tmp_path / name, fstype, options)
    write(proc / "self" / "mountinfo", lines)
    return proc


V1_CGROUP = "4:memory:/jobs/job1\n3:cpu,cpuacct:/jobs/job1\n1:name=systemd:/\n0::/\n"
V1_MOUNTS = [
    ("/", "cg/memory", "cgroup", "rw,memory"),
    ("/", "cg/cpu,cpuacct", "cgroup", "rw,cpu,cpuacct"),
    ("/", "cg/unified", "cgroup2", "rw"),
]


def test_cgroup_v1_limits_of_the_process_and_its_ancestors(tmp_path):
    proc = fake_proc(tmp_path, V1_CGROUP, V1_MOUNTS)
    cpu, memory = tmp_path / "cg/cpu,cpuacct", tmp_path / "cg/memory"
    write(cpu / "jobs/job1/cpu.cfs_quota_us", "150000\n")
    write(cpu / "jobs/job1/cpu.cfs_period_us", "100000\n")
    write(cpu / "jobs/cpu.cfs_quota_us", "-1\n")
    write(cpu / "jobs/cpu.cfs_period_us", "100000\n")
    write(memory / "jobs/job1/memory.limit_in_bytes", "9223372036854771712\n")
    write(memory / "jobs/memory.limit_in_bytes", f"{2 * GIB}\n")
    write(memory / "memory.limit_in_bytes", "9223372036854771712\n")
    assert cgroup_cpu_limit(proc) == 1.5
    assert cgroup_memory_limit_mb(proc) == 2048
    assert available_memory_mb(proc) == 2048
    assert available_cpus(proc) == min(AFFINITY, 1.5)


def test_cgroup_v2_limits(tmp_path):
    proc = fake_proc(tmp_path, "0::/user.slice/job1\n", [("/", "cg2", "cgroup2", "rw,nsdelegate")])
    root = tmp_path / "cg2"
    write(root / "user.slice/job1/cpu.max", "50000 100000\n")
    write(root / "user.slice/cpu.max", "max 100000\n")
    write(root / "user.slice/job1/memory.max", "max\n")
    write(root / "user.slice/memory.max", f"{GIB}\n")
    assert cgroup_cpu_limit(proc) == 0.5
    assert available_cpus(proc) == 0.5
    assert cgroup_memory_limit_mb(proc) == 1024
    assert available_memory_mb(proc) == 1024


def test_limits_above_memtotal_do_not_raise_it(tmp_path):
    proc = fake_proc(tmp_path, "0::/a\n", [("/", "cg2", "cgroup2", "rw")])
    write(tmp_path / "cg2/a/memory.max", f"{64 * GIB}\n")
    assert available_memory_mb(proc) == 8192


def test_container_mount_showing_its_own_cgroup_as_root(tmp_path):
    proc = fake_proc(
        tmp_path,
        "5:memory:/docker/abc\n2:cpu:/docker/abc\n",
        [
            ("/docker/abc", "mem with space", "cgroup", "rw,memory"),
            ("/docker/abc", "cpu", "cgroup", "rw,cpu"),
        ],
    )
    write(tmp_path / "mem with space/memory.limit_in_bytes", f"{3 * GIB}\n")
    write(tmp_path / "cpu/cpu.cfs_quota_us", "200000\n")
    write(tmp_path / "cpu/cpu.cfs_period_us", "100000\n")
    assert cgroup_memory_limit_mb(proc) == 3072
    assert cgroup_cpu_limit(proc) == 2.0


def test_no_limits(tmp_path):
    proc = fake_proc(tmp_path, V1_CGROUP, V1_MOUNTS)
    assert cgroup_cpu_limit(proc) is None
    assert cgroup_memory_limit_mb(proc) is None
    assert available_cpus(proc) == AFFINITY
    assert available_memory_mb(proc) == 8192


def test_cgroup_outside_the_mount_is_ignored(tmp_path):
    proc = fake_proc(tmp_path, "4:memory:/other\n", [("/jobs", "mem", "cgroup", "rw,memory")])
    write(tmp_path / "mem/memory.limit_in_bytes", f"{GIB}\n")
    assert cgroup_memory_limit_mb(proc) is None


def test_no_cgroup_files_at_all(tmp_path):
    proc = tmp_path / "proc"
    write(proc / "meminfo", "MemTotal:        4096 kB\n")
    assert cgroup_cpu_limit(proc) is None
    assert available_memory_mb(proc) == 4
