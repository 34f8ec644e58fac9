"""A task's seccomp profile compiled to BPF once per process, for crun to load as it is.

crun compiles `linux.seccomp` with libseccomp at every container start: for Docker's profile
(~370 syscalls, three x86 ABIs) that took ~10 ms of a ~10 ms `crun run` here. crun also takes
the compiled filter from the annotation `run.oci.seccomp_bpf_data` (base64 of the `struct
sock_filter` array) and then compiles nothing. So the executor compiles each distinct profile
once, with the same libseccomp (through ctypes, `bpf_annotation`), and puts the result in
that annotation of crun tasks; `linux.seccomp` stays in the config as the readable source
(and is what runc, which has no such annotation, compiles). Where libseccomp cannot be loaded
or refuses the profile, there is no annotation and crun compiles the profile itself.

Semantics follow the OCI runtime spec as crun reads it: the default action with
`defaultErrnoRet`, the architectures added to the native one, each rule's action for each
syscall name libseccomp knows (unknown names are skipped, as crun does), its argument
comparisons (`SCMP_CMP_MASKED_EQ`: `(arg & value) == valueTwo`).
"""

from __future__ import annotations

import base64
import ctypes
import ctypes.util
import functools
import json
import logging
import os
from collections.abc import Mapping
from typing import Any

log = logging.getLogger("gpuyard.runtime")

ANNOTATION = "run.oci.seccomp_bpf_data"
ACT_ALLOW = 0x7FFF0000
ACT_ERRNO = 0x00050000
SCMP_ERROR = -1
OPS = {
    "SCMP_CMP_NE": 1,
    "SCMP_CMP_LT": 2,
    "SCMP_CMP_LE": 3,
    "SCMP_CMP_EQ": 4,
    "SCMP_CMP_GE": 5,
    "SCMP_CMP_GT": 6,
    "SCMP_CMP_MASKED_EQ": 7,
}
# OCI's SCMP_ARCH_* → libseccomp's name for it
ARCH_NAMES = {
    "SCMP_ARCH_X86": "x86",
    "SCMP_ARCH_X86_64": "x86_64",
    "SCMP_ARCH_X32": "x32",
    "SCMP_ARCH_ARM": "arm",
    "SCMP_ARCH_AARCH64": "aarch64",
    "SCMP_ARCH_S390": "s390",
    "SCMP_ARCH_S390X": "s390x",
    "SCMP_ARCH_PPC64LE": "ppc64le",
    "SCMP_ARCH_RISCV64": "riscv64",
}


class ArgCmp(ctypes.Structure):
    """libseccomp's `struct scmp_arg_cmp`."""

    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


class CompileError(Exception):
    """libseccomp is missing or refused the profile."""


@functools.cache
def _libseccomp() -> ctypes.CDLL:
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError as e:
        raise CompileError(f"libseccomp cannot be loaded: {e}") from e
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_arch_resolve_name.restype = ctypes.c_uint32
    lib.seccomp_arch_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_arch_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(ArgCmp),
    ]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    return lib


def _action(rule: Mapping[str, Any]) -> int:
    if rule["action"] == "SCMP_ACT_ALLOW":
        return ACT_ALLOW
    if rule["action"] == "SCMP_ACT_ERRNO":
        return ACT_ERRNO | (int(rule.get("errnoRet", 1)) & 0xFFFF)
    raise CompileError(f"action {rule['action']} is not compiled here")


def _add_rule(lib: ctypes.CDLL, ctx: int, rule: Mapping[str, Any]) -> None:
    args = rule.get("args") or []
    cmps = (ArgCmp * max(1, len(args)))(
        *(ArgCmp(a["index"], OPS[a["op"]], a["value"], a.get("valueTwo", 0)) for a in args)
    )
    for name in rule["names"]:
        nr = lib.seccomp_syscall_resolve_name(name.encode())
        if nr == SCMP_ERROR:
            continue  # a name this libseccomp does not know: crun skips it too
        rc = lib.seccomp_rule_add_array(ctx, _action(rule), nr, len(args), cmps)
        if rc != 0:
            raise CompileError(f"libseccomp refused the rule for {name}: {os.strerror(-rc)}")


def compile_bpf(section: Mapping[str, Any]) -> bytes:
    """The BPF program of an OCI `linux.seccomp` section (CompileError if it cannot)."""
    lib = _libseccomp()
    if section.get("defaultAction") != "SCMP_ACT_ERRNO":
        raise CompileError(f"default action {section.get('defaultAction')} is not compiled here")
    ctx = lib.seccomp_init(ACT_ERRNO | (int(section.get("defaultErrnoRet", 1)) & 0xFFFF))
    if not ctx:
        raise CompileError("seccomp_init failed")
    try:
        for arch in section.get("architectures", [])[1:]:  # the first is the native one
            token = lib.seccomp_arch_resolve_name(ARCH_NAMES.get(arch, arch).encode())
            if token == 0 or lib.seccomp_arch_add(ctx, token) not in (0, -17):  # -EEXIST
                raise CompileError(f"libseccomp cannot add the architecture {arch}")
        for rule in section.get("syscalls", []):
            _add_rule(lib, ctx, rule)
        fd = os.memfd_create("gpuyard-seccomp", os.MFD_CLOEXEC)
        try:
            if lib.seccomp_export_bpf(ctx, fd) != 0:
                raise CompileError("seccomp_export_bpf failed")
            size = os.lseek(fd, 0, os.SEEK_CUR)
            return os.pread(fd, size, 0)
        finally:
            os.close(fd)
    finally:
        lib.seccomp_release(ctx)


@functools.cache
def _annotation_of(text: str) -> str | None:
    try:
        return base64.b64encode(compile_bpf(json.loads(text))).decode()
    except CompileError as e:
        log.warning("crun will compile each task's seccomp profile itself: %s", e)
        return None


def bpf_annotation(section: Mapping[str, Any]) -> dict[str, str]:
    """`{ANNOTATION: base64 BPF}` of `section` (compiled once per distinct profile), or {}."""
    value = _annotation_of(json.dumps(section, sort_keys=True))
    return {ANNOTATION: value} if value else {}


def precompile_seccomp(runtime_name: str, config: dict[str, Any]) -> None:
    """Give a crun task's config its filter precompiled (nothing for runc, or unconfined)."""
    section = config.get("linux", {}).get("seccomp")
    if runtime_name == "crun" and section:
        config.setdefault("annotations", {}).update(bpf_annotation(section))
