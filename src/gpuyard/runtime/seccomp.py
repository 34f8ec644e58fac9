"""The syscall filter of a task: Docker's default seccomp profile, resolved into the OCI
`linux.seccomp` section for the task's architecture, capabilities and kernel.

The profile is data (`data/seccomp-docker-20.10.24.json`, Docker's own, Apache-2.0; provenance
in `data/README.md`). As Docker does, a rule applies where its `includes` hold (the host's
architecture, every capability named, a kernel at least `minKernel`) and its `excludes` do
not; everything else fails with EPERM. Tasks never hold CAP_SYS_ADMIN, so the rules gated on it
keep their deny side: no `mount`, `unshare`, `setns`, `bpf`, `keyctl`, `perf_event_open`;
`clone` only without a namespace flag (CLONE_NEWUSER included: no new user namespace inside a
task), `clone3` fails with ENOSYS (its flags sit in memory a filter cannot read, so glibc
falls back to the filtered `clone`).

gpuyard's changes on top (`DENIED`, `ALLOWED_NEWER`): io_uring is denied (as Docker ≥ 25 and
containerd do: a large kernel attack surface, and its requests bypass this filter), and the
ordinary calls of kernels newer than the profile are allowed (glibc ≥ 2.39 uses `fchmodat2`
and falls back only on ENOSYS, not on EPERM).

A tenant's `seccomp: unconfined` (set by a platform admin) runs its tasks without a filter.
"""

from __future__ import annotations

import functools
import json
import platform
import re
from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Any

PROFILE = "seccomp-docker-20.10.24.json"
DEFAULT = "default"  # Tenant.seccomp / TaskLaunch.seccomp: Docker's profile, as changed here
UNCONFINED = "unconfined"  # no filter (a platform admin's choice for one tenant)
MODES = (DEFAULT, UNCONFINED)
EPERM = 1
DENIED = frozenset({"io_uring_setup", "io_uring_enter", "io_uring_register"})
ALLOWED_NEWER = (
    "cachestat",  # 6.5
    "fchmodat2",  # 6.6, glibc 2.39's chmod
    "map_shadow_stack",  # 6.6, CET shadow stacks of glibc 2.39
    "futex_wake",  # 6.7
    "futex_wait",
    "futex_requeue",
    "mseal",  # 6.10, glibc 2.41 seals its own mappings
)
# the host's `uname -m` → Go's name of it (the profile's `arches`) and libseccomp's
GO_ARCH = {
    "x86_64": "amd64",
    "aarch64": "arm64",
    "s390x": "s390x",
    "ppc64le": "ppc64le",
    "riscv64": "riscv64",
}
SECCOMP_ARCH = {
    "amd64": "SCMP_ARCH_X86_64",
    "arm64": "SCMP_ARCH_AARCH64",
    "s390x": "SCMP_ARCH_S390X",
    "ppc64le": "SCMP_ARCH_PPC64LE",
    "riscv64": "SCMP_ARCH_RISCV64",
}


@functools.cache
def docker_profile() -> dict[str, Any]:
    """The vendored profile as Docker wrote it (read once per process)."""
    text = resources.files("gpuyard.runtime").joinpath("data", PROFILE).read_text()
    profile: dict[str, Any] = json.loads(text)
    return profile


def kernel_version(release: str) -> tuple[int, ...]:
    """`6.18.44-fc-v669` → (6, 18, 44)."""
    m = re.match(r"(\d+(?:\.\d+)*)", release)
    return tuple(int(p) for p in m.group(1).split(".")) if m else ()


def _applies(
    rule: Mapping[str, Any], arch: str, caps: frozenset[str], kernel: tuple[int, ...]
) -> bool:
    """Docker's reading of a rule's `includes` and `excludes` for one container."""
    inc, exc = rule.get("includes") or {}, rule.get("excludes") or {}
    if inc.get("arches") and arch not in inc["arches"]:
        return False
    if any(c not in caps for c in inc.get("caps") or ()):
        return False
    if inc.get("minKernel") and kernel < kernel_version(inc["minKernel"]):
        return False
    if arch in (exc.get("arches") or ()) or caps & set(exc.get("caps") or ()):
        return False
    return not (exc.get("minKernel") and kernel >= kernel_version(exc["minKernel"]))


def _oci_rule(rule: Mapping[str, Any], names: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"names": names, "action": rule["action"]}
    if rule.get("errnoRet") is not None:
        out["errnoRet"] = rule["errnoRet"]
    if rule.get("args"):
        out["args"] = [
            {
                "index": a["index"],
                "value": a["value"],
                "valueTwo": a.get("valueTwo", 0),
                "op": a["op"],
            }
            for a in rule["args"]
        ]
    return out


def _architectures(profile: Mapping[str, Any], native: str) -> list[str]:
    for entry in profile.get("archMap") or ():
        if entry["architecture"] == native:
            return [native, *(entry.get("subArchitectures") or ())]
    return [native]


@functools.cache
def _resolved(caps: frozenset[str], machine: str, release: str) -> str:
    profile = docker_profile()
    arch = GO_ARCH.get(machine, machine)
    kernel = kernel_version(release)
    rules = []
    for rule in profile["syscalls"]:
        if not _applies(rule, arch, caps, kernel):
            continue
        allow = rule["action"] == "SCMP_ACT_ALLOW"
        names = [n for n in rule["names"] if not (allow and n in DENIED)]
        if names:
            rules.append(_oci_rule(rule, names))
    rules.append({"names": list(ALLOWED_NEWER), "action": "SCMP_ACT_ALLOW"})
    native = SECCOMP_ARCH.get(arch)
    section = {
        "defaultAction": profile["defaultAction"],
        "defaultErrnoRet": EPERM,
        "architectures": _architectures(profile, native) if native else [],
        "syscalls": rules,
    }
    return json.dumps(section)


def task_seccomp(
    capabilities: Iterable[str], machine: str | None = None, release: str | None = None
) -> dict[str, Any]:
    """The `linux.seccomp` of a task whose bounding set is `capabilities`, on this host (or
    on `machine` / kernel `release`). A fresh dict each call (callers may change it)."""
    text = _resolved(
        frozenset(capabilities), machine or platform.machine(), release or platform.release()
    )
    section: dict[str, Any] = json.loads(text)
    return section
