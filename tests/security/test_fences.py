"""Fences (issue 15, item 5): what one tenant's tasks can take of a node, together.

Found: no pids limit above the tasks (two tasks reached 25 % of the host's `pid_max`). Now the
node's runtime puts a pids limit on gpuyard's parent cgroup when it starts: a fork bomb stops
there (EAGAIN) while the host still forks.

Found: no disk limits (a task's log grew 12 GB in 30 s). Now a task's log keeps its head and
tail within its tenant's cap (`logLimitMB`), with a marker where bytes were dropped, and the
log API (`X-Log-Truncated`, `X-Log-Dropped-Bytes`) and the portal say it was truncated.

Found: `/workspace` writes 1.4 GB/s with no quota. Now `/workspace` and an image root's writes
are tmpfs of the tenant's `workspaceMB` (by default the task's memory): past it, ENOSPC.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gpuyard.runtime.cgroups import CGROUP_ROOT, is_v2, pids_current, pids_max, v1_mounts
from gpuyard.runtime.executor import ContainerRuntime
from gpuyard.runtime.overlay import mounted_under
from gpuyard.runtime.pidfence import default_limit, node_capacity, reserve
from runtime.conftest import container_host, make_launch, runtime  # noqa: F401 - fixtures
from runtime.helpers import MakeLaunch, wait_exited, wait_for
from runtime.test_images import image_files  # noqa: F401 - fixture

pytestmark = pytest.mark.container

NODE_LIMIT = 64
BOMB = r"""
import errno, os, sys, time
n = 0
try:
    while n < 5000:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        n += 1
    outcome = "never stopped"
except OSError as e:
    outcome = errno.errorcode[e.errno]
print(f"forked {n} then {outcome}", flush=True)
time.sleep(float(sys.argv[1]))
"""


def remove_cgroup(path: str) -> None:
    """rmdir `path` in every hierarchy (the runtimes made it where they made the tasks')."""
    roots = {CGROUP_ROOT} if is_v2() else {*v1_mounts().values(), CGROUP_ROOT / "unified"}
    for root in roots:
        with contextlib.suppress(OSError):
            (root / path.strip("/")).rmdir()


@pytest.fixture(params=["crun", "runc"])
def fenced(
    request: pytest.FixtureRequest,
    container_host: None,  # noqa: F811
    tmp_path: Path,
) -> Iterator[ContainerRuntime]:
    """A runtime whose tasks go under a parent cgroup of their own, fenced at NODE_LIMIT."""
    parent = f"/gpuyard-test-{uuid.uuid4().hex[:8]}"
    rt = ContainerRuntime(
        tmp_path / "state", runtime=request.param, cgroup_parent=parent, node_pids_limit=NODE_LIMIT
    )
    yield rt
    leftover = rt.keys()
    for key in leftover:
        rt.stop(key, 0)
        wait_exited(rt, key)
    rt.close()
    remove_cgroup(parent)


def test_fork_bomb_stops_at_the_node_limit_and_the_host_still_forks(
    fenced: ContainerRuntime,
    make_launch: MakeLaunch,  # noqa: F811
) -> None:
    assert fenced.pid_fence is not None and fenced.pid_fence.limit == NODE_LIMIT
    assert pids_max(fenced.cgroup_parent) == NODE_LIMIT
    command = f"/usr/bin/python3 -c {shlex.quote(BOMB)} 4"
    launch = make_launch(command, data_dir=None, output_dir=None, pids_limit=4096)
    fenced.start(launch)
    wait_for("the bomb to hold what it got", lambda: b"forked" in fenced.read_log(launch.key))
    current = pids_current(fenced.cgroup_parent)
    assert current is not None and current <= NODE_LIMIT  # the task's own 4096 never reached
    assert subprocess.run(["true"], check=False, timeout=10).returncode == 0  # the host still forks
    wait_exited(fenced, launch.key)
    line = fenced.read_log(launch.key).decode().strip().splitlines()[-1]
    forked = int(line.split()[1])
    assert line.endswith("then EAGAIN") and NODE_LIMIT - 8 <= forked < NODE_LIMIT, line


def test_gpuyard_parent_is_fenced_at_capacity_minus_reserve(
    runtime: ContainerRuntime,  # noqa: F811
) -> None:
    """The real node: `/gpuyard` gets min(pid_max, threads-max) minus max(10 %, 4096)."""
    capacity = node_capacity()
    assert default_limit() == capacity - reserve(capacity)
    assert reserve(capacity) >= min(4096, capacity - 1)
    assert runtime.pid_fence is not None, "no pids limit was set on /gpuyard"
    assert pids_max("/gpuyard") == default_limit()
    assert json.dumps(runtime.pid_fence.limit) == str(default_limit())


PRINTED = 3_000_000  # `seq 1 N; echo LAST`: about 21 MB of output, in about a second
LOG_CAP = 1 << 20


def printed_bytes(n: int = PRINTED) -> int:
    digits = sum((min(n, 10**d - 1) - 10 ** (d - 1) + 1) * (d + 1) for d in range(1, 8))
    return digits + len("LAST\n")


def check_capped(log: bytes, dropped: int) -> None:
    """Within the cap, its head and its tail kept, the marker between, every byte counted."""
    assert 0 < len(log) <= LOG_CAP
    assert log.startswith(b"1\n2\n3\n") and log.endswith(f"\n{PRINTED}\nLAST\n".encode())
    assert f"[gpuyard: {dropped} bytes of this task's output were dropped here".encode() in log
    marker_block = 4096
    assert len(log) - marker_block + dropped == printed_bytes()


def test_a_task_printing_without_end_keeps_head_and_tail_within_its_cap(
    runtime: ContainerRuntime,  # noqa: F811
    make_launch: MakeLaunch,  # noqa: F811
) -> None:
    launch = make_launch(f"seq 1 {PRINTED}; echo LAST", log_limit_mb=1)
    runtime.start(launch)
    exit_ = wait_exited(runtime, launch.key, 60)
    assert exit_.reason == "Completed", exit_.message
    dropped = runtime.log_dropped(launch.key)
    check_capped(runtime.read_log(launch.key, 0, 2 * LOG_CAP), dropped)
    runtime.remove(launch.key)  # archived: still capped, still says so
    assert runtime.log_dropped(launch.key) == dropped
    check_capped(runtime.read_log(launch.key, 0, 2 * LOG_CAP), dropped)


def test_log_api_and_portal_say_truncated(server) -> None:
    r = server.http.patch("/api/v1/tenants/default", json={"logLimitMB": 1})
    assert r.status_code == 200 and r.json()["logLimitMB"] == 1, r.text
    spec = f"name: flood\ntaskRoles:\n  main:\n    command: seq 1 {PRINTED}; echo LAST\n"
    small = server.submit("name: small\ntaskRoles:\n  main:\n    command: echo hi\n")
    flood = server.submit(spec)
    assert server.wait(flood)["state"] == "SUCCEEDED"
    assert server.wait(small)["state"] == "SUCCEEDED"
    r = server.http.get(f"/api/v1/jobs/{flood}/logs")
    assert r.status_code == 200 and r.headers["X-Log-Truncated"] == "true", r.headers
    dropped = int(r.headers["X-Log-Dropped-Bytes"])
    check_capped(r.content, dropped)
    r = server.http.get(f"/api/v1/jobs/{small}/logs")
    assert r.headers["X-Log-Truncated"] == "false" and r.headers["X-Log-Dropped-Bytes"] == "0"
    with httpx.Client(base_url=server.url, cookies={"gpuyard_session": server.token}) as portal:
        page = portal.get(f"/jobs/{flood}/log")
    assert page.status_code == 200 and "truncated" in page.text, page.text[:500]
    assert f"{dropped} bytes dropped" in page.text


FILL = "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do cat /bin/busybox >> {path} || {{ echo full-at-$i; break; }}; done"


def test_workspace_writes_stop_at_the_quota(
    runtime: ContainerRuntime,  # noqa: F811
    make_launch: MakeLaunch,  # noqa: F811
) -> None:
    """A host-root task writes /workspace past its 16 MiB quota: ENOSPC, the node's disk
    untouched; once it deletes, it can write again."""
    fill = FILL.format(path="$HOME/big")
    command = f"{fill}; stat -c size=%s $HOME/big; rm $HOME/big; echo ok > $HOME/ok && cat $HOME/ok"
    launch = make_launch(command, workspace_mb=16, data_dir=None, output_dir=None)
    runtime.start(launch)
    exit_ = wait_exited(runtime, launch.key, 60)
    log = runtime.read_log(launch.key).decode()
    assert exit_.reason == "Completed", exit_.message
    assert "No space left on device" in log and "full-at-" in log and log.endswith("ok\n"), log
    size = int(log.split("size=")[1].split()[0])
    assert 15 << 20 <= size <= 16 << 20, log
    assert not any(runtime.task_dir(launch.key).work.iterdir())  # nothing on the node's disk


def test_image_root_writes_stop_at_the_quota(
    runtime: ContainerRuntime,  # noqa: F811
    make_launch: MakeLaunch,  # noqa: F811
    image_files: dict[str, Path],  # noqa: F811
) -> None:
    """An image task writes its root (the overlay's upper layer) past an 8 MiB quota: ENOSPC;
    the layer is gone with the task's overlay (no mount left, nothing on the node's disk)."""
    runtime.images.import_file(image_files["rootfs"], "bb:quota")
    command = FILL.format(path="/big") + "; rm /big; echo fine > /etc/small && cat /etc/small"
    launch = make_launch(command, image="bb:quota", workspace_mb=8, data_dir=None, output_dir=None)
    runtime.start(launch)
    exit_ = wait_exited(runtime, launch.key, 60)
    log = runtime.read_log(launch.key).decode()
    assert exit_.reason == "Completed", exit_.message
    assert "No space left on device" in log and "full-at-" in log and "fine" in log, log
    assert not (runtime.task_dir(launch.key).path / "upper").exists()
    runtime.remove(launch.key)
    assert mounted_under(runtime.tasks_dir) == []
