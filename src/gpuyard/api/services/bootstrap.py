"""First start on an empty store: the platform admin `admin`, the `default` tenant, and the
admin's token in `<data dir>/admin-token` (mode 0600, the only place it is ever written).

The `default` tenant is guaranteed every GPU of the nodes, per flavor, and its storage roots
are the ones given to `gpuyard up --storage-root`, or else `<data dir>/storage` (not `/tmp`:
a root is the tenant's own, and the host's /tmp is everybody's). Nothing happens when any user
exists already. `assign_ids` runs at every start: tenants stored before tenants had their own
uid get one.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from gpuyard.api.services.storage_roots import prepare_roots
from gpuyard.model import FlavorQuota, Node, Tenant
from gpuyard.store import Membership, PlatformRole, Store, TenantRole

log = logging.getLogger("gpuyard.api")

ADMIN = "admin"
DEFAULT_TENANT = "default"
TOKEN_FILE = "admin-token"


def token_file(data_dir: Path) -> Path:
    return data_dir / TOKEN_FILE


def default_storage_roots(data_dir: Path) -> tuple[str, ...]:
    return (str(data_dir / "storage"),)


def default_tenant(nodes: Iterable[Node], storage_roots: Sequence[str]) -> Tenant:
    flavors = Counter(g.type for n in nodes for g in n.gpus if g.healthy)
    quotas = tuple(FlavorQuota(f, count) for f, count in sorted(flavors.items()))
    return Tenant(DEFAULT_TENANT, quotas=quotas, storage_roots=tuple(storage_roots))


def bootstrap(
    store: Store, nodes: Iterable[Node], data_dir: Path, storage_roots: Sequence[str] = ()
) -> Path | None:
    """Set up an empty store; the path of the new admin token file, or None if not empty."""
    if store.users.count():
        return None
    roots = tuple(storage_roots) or default_storage_roots(data_dir)
    if not store.tenants.exists(DEFAULT_TENANT):
        prepare_roots(store.tenants.create(default_tenant(nodes, roots)).tenant)
    store.users.create(
        ADMIN, PlatformRole.ADMIN, [Membership(DEFAULT_TENANT, TenantRole.TENANT_ADMIN)]
    )
    made = store.tokens.create(ADMIN, "bootstrap")
    return write_secret(token_file(data_dir), made.secret)


def assign_ids(store: Store) -> None:
    """Give each tenant stored without a uid its own id block (and its roots to it)."""
    for name in store.tenants.assign_missing_uids():
        record = store.tenants.get(name)
        if record is not None:
            log.info("tenant %s: its tasks now run as uid %s", name, record.tenant.uid)
            prepare_roots(record.tenant)


def write_secret(path: Path, secret: str) -> Path:
    """Write `secret` to a file only its owner can read (0600 from the start, no window)."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secret + "\n")
    return path
