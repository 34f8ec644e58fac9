"""Syscalls (issue 15, item 4): a task runs under Docker's default seccomp profile.

Found: no syscall filter, so a task could make a user namespace of its own (`unshare -U`), be
root there and mount file systems, use the kernel keyring, and so on. Here a probe runs inside
real containers (crun and runc) and tries each; ordinary work must still run. A tenant a
platform admin set `seccomp: unconfined` runs without the filter (the same probe gets through,
which also shows the probe can see a hole).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from api.conftest import World, spec
from gpuyard.model import TaskReason
from gpuyard.model.tenant import SeccompMode
from gpuyard.runtime.executor import ContainerRuntime
from gpuyard.runtime.seccomp import task_seccomp
from gpuyard.runtime.seccompbpf import ANNOTATION, compile_bpf
from runtime.conftest import container_host, make_launch, runtime  # noqa: F401 - fixtures
from runtime.helpers import MakeLaunch, run_task
from security.apiworld import world  # noqa: F401 - fixture

# Each check prints its outcome: "ok" (the call worked) or the errno's name.
PROBE = r"""
import ctypes, errno, json, os, subprocess, threading
libc = ctypes.CDLL(None, use_errno=True)
SYS = {"keyctl": 250, "bpf": 321, "clone": 56, "clone3": 435, "io_uring_setup": 425}
CLONE_NEWUSER, SIGCHLD = 0x10000000, 17

def call(nr, *args):
    r = libc.syscall(nr, *[ctypes.c_long(a) for a in args])
    return "ok" if r >= 0 else errno.errorcode[ctypes.get_errno()]

def clone_newuser():
    r = libc.syscall(SYS["clone"], ctypes.c_long(CLONE_NEWUSER | SIGCHLD), 0, 0, 0, 0)
    if r == 0:
        os._exit(0)
    if r > 0:
        os.waitpid(r, 0)
        return "ok"
    return errno.errorcode[ctypes.get_errno()]

def py_unshare():  # os.unshare is Python >= 3.12; the host's may be older
    r = libc.unshare(ctypes.c_int(CLONE_NEWUSER))
    return "ok" if r == 0 else errno.errorcode[ctypes.get_errno()]

def sh(cmd):
    done = subprocess.run(["/bin/sh", "-c", cmd], capture_output=True, text=True)
    return "ok" if done.returncode == 0 else "failed: " + done.stderr.strip()[-80:]

out = {
    "unshare_U": sh("unshare -U true"),
    "unshare_U_mount": sh("unshare -Ur sh -c 'unshare -m mount -t tmpfs none /tmp'"),
    "py_unshare_user": py_unshare(),
    "clone_newuser": clone_newuser(),
    "clone3": call(SYS["clone3"], 0, 0),
    "keyctl": call(SYS["keyctl"], 0, -3, 0),  # KEYCTL_GET_KEYRING_ID of the session keyring
    "bpf": call(SYS["bpf"], 0, 0, 0),
    "io_uring_setup": call(SYS["io_uring_setup"], 1, 0),
}
t = threading.Thread(target=lambda: None); t.start(); t.join()
out["ordinary"] = sh("ls / | wc -l && echo hi > $HOME/x && cat $HOME/x && (sleep 0 &) && wait")
out["subprocess"] = "ok" if subprocess.run(["true"]).returncode == 0 else "failed"
print(json.dumps(out))
"""

pytestmark = pytest.mark.container


def probe(rt: ContainerRuntime, make: MakeLaunch, **fields: object) -> dict:
    command = "/usr/bin/python3 -c " + shlex.quote(PROBE)
    launch = make(command, data_dir=None, output_dir=None, **fields)
    exit_ = run_task(rt, launch, timeout=60)
    log = rt.read_log(launch.key).decode()
    assert exit_.reason == TaskReason.COMPLETED, f"{exit_.message}\n{log}"
    config = json.loads(rt.task_dir(launch.key).config.read_text())
    filtered = fields.get("seccomp", "default") == "default"
    assert ("seccomp" in config["linux"]) == filtered
    # crun loads the filter precompiled from the same profile (seccompbpf.py); runc compiles it
    assert (ANNOTATION in config.get("annotations", {})) == (filtered and rt.name == "crun")
    return json.loads(log.strip().splitlines()[-1])


@pytest.mark.parametrize("run_as", [(0, 0), (65534, 65534)], ids=["root", "user"])
def test_hostile_syscalls_denied_ordinary_work_runs(
    runtime: ContainerRuntime,  # noqa: F811
    make_launch: MakeLaunch,  # noqa: F811
    tmp_path: Path,
    run_as: tuple[int, int],
) -> None:
    got = probe(runtime, make_launch, run_as=run_as)
    assert got["unshare_U"].startswith("failed"), got  # no user namespace of its own
    assert got["unshare_U_mount"].startswith("failed"), got  # so never root to mount
    assert got["py_unshare_user"] == "EPERM", got
    assert got["clone_newuser"] == "EPERM", got
    assert got["clone3"] == "ENOSYS", got  # glibc falls back to the filtered clone
    assert got["keyctl"] == "EPERM", got
    assert got["bpf"] == "EPERM", got
    assert got["io_uring_setup"] == "EPERM", got
    assert got["ordinary"] == "ok" and got["subprocess"] == "ok", got


def test_unconfined_tenant_runs_without_filter(
    runtime: ContainerRuntime,  # noqa: F811
    make_launch: MakeLaunch,  # noqa: F811
    tmp_path: Path,
) -> None:
    got = probe(runtime, make_launch, seccomp="unconfined")
    assert got["unshare_U"] == "ok" and got["keyctl"] == "ok", got
    assert got["clone3"] == "EINVAL", got  # the kernel's own answer to a bad clone3


def test_profile_shape() -> None:
    """What the resolved profile says, independent of the host's libseccomp."""
    section = task_seccomp(["CAP_KILL"], machine="x86_64", release="6.1.0")
    assert section["defaultAction"] == "SCMP_ACT_ERRNO" and section["defaultErrnoRet"] == 1
    assert section["architectures"] == ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"]
    by_name: dict[str, list[dict]] = {}
    for rule in section["syscalls"]:
        for name in rule["names"]:
            by_name.setdefault(name, []).append(rule)
    for denied in (
        "unshare",
        "setns",
        "mount",
        "umount2",
        "keyctl",
        "bpf",
        "io_uring_setup",
        "perf_event_open",
        "userfaultfd",
        "open_by_handle_at",
        "kexec_load",
    ):
        assert all(r["action"] != "SCMP_ACT_ALLOW" for r in by_name.get(denied, [])), denied
    (clone,) = by_name["clone"]
    assert clone["args"] == [
        {"index": 0, "value": 0x7E020000, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}
    ]  # no CLONE_NEW* flag, CLONE_NEWUSER (0x10000000) among them
    assert by_name["clone3"] == [{"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38}]
    assert {r["action"] for r in by_name["read"]} == {"SCMP_ACT_ALLOW"}
    # a capability the task never has would open the gated calls: the profile is read per task
    program = compile_bpf(section)  # what crun is given: whole sock_filter instructions
    assert len(program) > 8 * 300 and len(program) % 8 == 0
    admin = task_seccomp(["CAP_SYS_ADMIN"], machine="x86_64", release="6.1.0")
    assert any("unshare" in r["names"] for r in admin["syscalls"])


def test_only_a_platform_admin_unconfines_a_tenant_and_its_tasks_get_it(
    world: World,  # noqa: F811
) -> None:
    """`Tenant.seccomp` is written by platform admins only, and carried to each task."""
    for who in ("redboss", "alice"):  # the tenant's own admin and a member: refused
        r = world.call(who, "PATCH", "/api/v1/tenants/red", json={"seccomp": "unconfined"})
        assert r.status_code == 403, r.text
    assert world.store.tenants.get("red").tenant.seccomp == SeccompMode.DEFAULT
    before = set(world.engine.launched)
    r = world.call("root", "PATCH", "/api/v1/tenants/red", json={"seccomp": "nonsense"})
    assert r.status_code == 422, r.text
    r = world.call("root", "PATCH", "/api/v1/tenants/red", json={"seccomp": "unconfined"})
    assert r.status_code == 200 and r.json()["seccomp"] == "unconfined", r.text
    assert world.submit("alice", spec("red", name="free")).status_code == 201
    assert world.submit("bob", spec("blue", name="held")).status_code == 201
    world.ctl.run_cycle()
    launched = {
        world.engine.launched[k].job_name: world.engine.launched[k].seccomp
        for k in set(world.engine.launched) - before
    }
    assert launched == {"free": "unconfined", "held": "default"}
