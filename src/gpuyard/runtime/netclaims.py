"""A task network namespace's life on disk: made, claimed by a task, torn down, swept.

A namespace is described by one record, `{"netns", "address", "cni"}` (its name under
/run/netns, its IPv4 address, the CNI config that made it), which is either a spare in the pool
(`netpool.py`) or a claim: `<net dir>/claims/<task key>.json`, which also gets `"down"` (the
nftables text that removes the task's rules) when the task is attached to it. Tearing a claim
down (`teardown_claim`) removes, in order, the task's rules, the veth and the address lease
(CNI DEL: also when the namespace is already gone) and the namespace, then the record; it holds
an flock on the record while it does, so the supervisor, `remove` and a sweep may race for it
and the work is done once. Everything is keyed by name: the namespace's name is the CNI
container id and the name of the address's lease file, so a crash at any point leaves pieces
that `sweep_unreferenced` recognises by the node's prefix.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

from gpuyard.runtime import cni, netns, nftrules

Record = dict[str, Any]
ORPHAN_CLAIM_S = 60.0  # a claim this old whose task never came: its start was lost


def make_netns(prefix: str, cni_config: dict[str, Any]) -> Record:
    """A fresh namespace on the node's bridge, with its address; undone if CNI fails."""
    name = prefix + secrets.token_hex(4)
    path = netns.add(name)
    try:
        netns.loopback_up(name)
        netns.disable_ipv6(name)
        address = cni.add(cni_config, name, path)
    except OSError:
        with contextlib.suppress(OSError):
            release_netns({"netns": name, "cni": cni_config})
        raise
    return {"netns": name, "address": address, "cni": cni_config}


def release_netns(record: Record) -> None:
    """The veth and the address lease (CNI DEL), then the namespace itself."""
    name = record["netns"]
    there = os.path.lexists(netns.path(name))
    cni.delete(record["cni"], name, netns.path(name) if there else None)
    netns.delete(name)


def read_record(path: Path) -> Record | None:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) and "netns" in value else None


def teardown_claim(path: Path) -> None:
    """Remove the task's rules, veth, lease and namespace, then the claim; nothing if gone.
    Every step is tried; the first error is raised after the others (the record stays then,
    so a later sweep tries again)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if not _still_linked(fd, path):  # another teardown finished while we waited
            return
        record = read_record(path)
        if record is None:
            os.unlink(path)
            return
        errors = _teardown(record)
        if errors:
            raise errors[0]
        os.unlink(path)
    finally:
        os.close(fd)


def _teardown(record: Record) -> list[OSError]:
    errors: list[OSError] = []
    if record.get("down"):
        try:
            nftrules.run(record["down"])
        except nftrules.NftError as e:
            if nftrules.tables_present(record.get("table", "")):  # else: gone with the table
                errors.append(e)
    try:
        release_netns(record)
    except OSError as e:
        errors.append(e)
    return errors


def _still_linked(fd: int, path: Path) -> bool:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    own = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)


def sweep_claims(claims: Path, tasks_dir: Path, orphan_after_s: float = ORPHAN_CLAIM_S) -> int:
    """Tear down the claims of tasks that ended (exit.json) or never came (no task dir, older
    than `orphan_after_s`: a start may be on its way meanwhile); how many went. A task dir
    without an exit is left to the runtime, which records a lost supervisor's exit and
    releases its claim."""
    gone = 0
    now = time.time()
    for path in _json_files(claims):
        task = tasks_dir / path.stem
        try:
            old = now - path.stat().st_mtime >= orphan_after_s
        except FileNotFoundError:
            continue
        if (task / "exit.json").exists() or (not task.exists() and old):
            with contextlib.suppress(OSError):
                teardown_claim(path)
                gone += 1
    return gone


def sweep_unreferenced(
    prefix: str, referenced: set[str], cni_config: dict[str, Any], ipam: Path
) -> int:
    """Namespaces of this node (`prefix`) and address leases that no record names: what a
    crash left between making a namespace and recording it; how many went."""
    gone = 0
    for name in netns.names(prefix):
        if name not in referenced:
            with contextlib.suppress(OSError):
                release_netns({"netns": name, "cni": cni_config})
                gone += 1
    for holder in _lease_holders(ipam / cni_config["name"]):
        if holder.startswith(prefix) and holder not in referenced:
            with contextlib.suppress(OSError):
                cni.delete(cni_config, holder, None)
                gone += 1
    return gone


def _lease_holders(leases: Path) -> set[str]:
    """The container ids that host-local's lease files (one per address) name."""
    holders = set()
    for lease in _files(leases):
        if lease.name.startswith(("last_reserved_ip", "lock")):
            continue
        with contextlib.suppress(OSError):
            holders.add(lease.read_text().split()[0])
    return holders


def _files(directory: Path) -> list[Path]:
    with contextlib.suppress(FileNotFoundError):
        return sorted(p for p in directory.iterdir() if p.is_file())
    return []


def _json_files(directory: Path) -> list[Path]:
    return [p for p in _files(directory) if p.suffix == ".json"]


def referenced_netns(*directories: Path) -> set[str]:
    """The namespaces named by the records in `directories` (claims, pool)."""
    names = set()
    for d in directories:
        for path in _json_files(d):
            record = read_record(path)
            if record is not None:
                names.add(str(record["netns"]))
    return names
