"""Rich rendering of who-am-I, tenants, users, members, registry logins, named storage and new
tokens (plain dicts in, camelCase keys as in docs/api.md; missing keys render as "-")."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpuyard.cli.render import NONE, plain, when_summary


def memberships_text(memberships: list[dict[str, Any]] | None) -> Text:
    if not memberships:
        return Text("no tenants", style="dim")
    return Text(", ".join(f"{m.get('tenant')} ({m.get('role')})" for m in memberships))


def render_whoami(console: Console, me: dict[str, Any], url: str) -> None:
    role = "platform admin" if me.get("admin") else "user"
    console.print(Text.assemble((str(me.get("name", "?")), "bold"), f" ({role}) at {url}"))
    console.print(Text.assemble("tenants: ", memberships_text(me.get("memberships"))))


def quota_text(quota: dict[str, Any]) -> str:
    """`A100-80GB:4 (borrow ≤2, lend ≤1, GPU memory 40000 MB)`."""
    limits = [
        f"{label} ≤{quota[key]}"
        for label, key in (("borrow", "borrowingLimit"), ("lend", "lendingLimit"))
        if quota.get(key) is not None
    ]
    if quota.get("gpuMemoryMB") is not None:
        limits.append(f"GPU memory {quota['gpuMemoryMB']} MB")
    extra = f" ({', '.join(limits)})" if limits else ""
    return f"{quota.get('flavor')}:{quota.get('guaranteed')}{extra}"


def render_tenants(console: Console, tenants: list[dict[str, Any]]) -> None:
    if not tenants:
        console.print("no tenants", style="dim")
        return
    table = Table(header_style="bold")
    for name in ("TENANT", "GUARANTEED GPUS", "WEIGHT", "POLICY", "STORAGE ROOTS"):
        table.add_column(name)
    for t in tenants:
        quotas = ", ".join(quota_text(q) for q in t.get("quotas") or []) or NONE
        roots = ", ".join(t.get("storageRoots") or []) or "none (no dataDir/outputDir)"
        table.add_row(
            plain(t.get("name")),
            Text(quotas),
            plain(t.get("weight")),
            plain(t.get("queuePolicy")),
            Text(roots),
        )
    console.print(table)


def render_user(console: Console, user: dict[str, Any]) -> None:
    role = "platform admin" if user.get("admin") else "user"
    console.print(
        Text.assemble(
            "user ",
            (str(user.get("name")), "bold"),
            f" ({role}); ",
            "tenants: ",
            memberships_text(user.get("memberships")),
        )
    )


def render_members(console: Console, tenant: str, members: list[dict[str, Any]]) -> None:
    if not members:
        console.print(f"tenant {tenant} has no members", style="dim")
        return
    table = Table(header_style="bold")
    table.add_column("USER")
    table.add_column("ROLE")
    for m in members:
        table.add_row(plain(m.get("user")), plain(m.get("role")))
    console.print(table)


def render_registries(console: Console, tenant: str, entries: list[dict[str, Any]]) -> None:
    """A tenant's registry logins: host, username, when and by whom set (never a secret)."""
    if not entries:
        console.print(f"tenant {tenant} has no registry logins", style="dim")
        return
    table = Table(header_style="bold")
    for name in ("REGISTRY", "USERNAME", "UPDATED", "BY"):
        table.add_column(name)
    for e in entries:
        table.add_row(
            plain(e.get("registry")),
            plain(e.get("username")),
            Text(when_summary(e.get("updatedAt"))),
            plain(e.get("updatedBy")),
        )
    console.print(table)


def render_storage(console: Console, tenant: str, entries: list[dict[str, Any]]) -> None:
    """A tenant's named storage: name, host path, mount point, mode, when and by whom set."""
    if not entries:
        console.print(f"tenant {tenant} has no named storage", style="dim")
        return
    table = Table(header_style="bold")
    for name in ("NAME", "PATH", "MOUNT POINT", "MODE", "UPDATED", "BY"):
        table.add_column(name)
    for e in entries:
        table.add_row(
            plain(e.get("name")),
            plain(e.get("path")),
            plain(e.get("mountPoint")),
            Text("ro" if e.get("readOnly") else "rw"),
            Text(when_summary(e.get("updatedAt"))),
            plain(e.get("updatedBy")),
        )
    console.print(table)


def render_new_token(out: Console, err: Console, made: dict[str, Any]) -> None:
    """The token alone on stdout (for scripts); what it is, and that it is shown once, on
    stderr."""
    err.print(
        Text(
            f"token {made.get('id')} ({made.get('name')}) for user {made.get('user')}; "
            "it is shown only this once: store it now",
            style="yellow",
        )
    )
    out.print(Text(str(made.get("token"))), soft_wrap=True)
