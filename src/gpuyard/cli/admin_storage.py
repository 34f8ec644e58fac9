"""`gpuyard admin storage …`: a tenant's named storage, what a job's `storage` (OpenPAI's
teamwise_storage `storageConfigNames`) mounts by name (platform admins set and remove; anyone
with a role in the tenant lists; docs/openpai.md, Named storage).

    gpuyard admin storage set vision datasets /mnt/nfs/vision/datasets
    gpuyard admin storage set vision scratch /mnt/nfs/vision/scratch --read-write \\
        --mount-point /mnt/scratch
    gpuyard admin storage ls vision
    gpuyard admin storage rm vision scratch

The host path must lie under the tenant's storage roots; the mount point (in the task) below
/mnt, by default /mnt/NAME. Read-only unless `--read-write`.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.text import Text

from gpuyard.cli.admin_registries import refused_fields
from gpuyard.cli.basics import EXIT_USAGE, HTTP_INVALID, ApiError, print_json
from gpuyard.cli.render_admin import render_storage
from gpuyard.cli.session import Output, api_errors, fail, session_of

storage_app = typer.Typer(
    help="Tenants' named storage (what a job's `storage` mounts).", no_args_is_help=True
)

Tenant = Annotated[str, typer.Argument(help="The tenant whose jobs may mount it.")]
Name = Annotated[str, typer.Argument(help="The storage's name (what jobs name).")]
OutputOpt = Annotated[Output, typer.Option("--output", "-o")]


def storage_body(path: str, mount_point: str | None, read_write: bool) -> dict[str, Any]:
    """The PUT body: `{"path", "readOnly"}`, and `mountPoint` when given."""
    body: dict[str, Any] = {"path": path, "readOnly": not read_write}
    if mount_point is not None:
        body["mountPoint"] = mount_point
    return body


@storage_app.command("set")
def storage_set(
    ctx: typer.Context,
    tenant: Tenant,
    name: Name,
    path: Annotated[str, typer.Argument(help="The host dir, under the tenant's storage roots.")],
    mount_point: Annotated[
        str | None, typer.Option("--mount-point", help="Where tasks see it (default /mnt/NAME).")
    ] = None,
    read_write: Annotated[
        bool, typer.Option("--read-write", help="Tasks may write to it (default: read-only).")
    ] = False,
    output: OutputOpt = Output.table,
) -> None:
    """Define TENANT's storage NAME (or replace it): jobs that name it mount PATH."""
    session = session_of(ctx)
    with api_errors(session):
        try:
            entry = session.client.set_storage(
                tenant, name, storage_body(path, mount_point, read_write)
            )
        except ApiError as exc:
            if exc.status != HTTP_INVALID:
                raise
            fail(session, refused_fields(exc), EXIT_USAGE)
    if output is Output.json:
        print_json(entry)
        return
    mode = "read-only" if entry.get("readOnly") else "read-write"
    said = f"{entry.get('path')} at {entry.get('mountPoint')}, {mode}"
    session.err.print(Text(f"tenant {tenant}'s storage {entry.get('name')}: {said}"))
    render_storage(session.out, tenant, [entry])


@storage_app.command("ls")
def storage_ls(ctx: typer.Context, tenant: Tenant, output: OutputOpt = Output.table) -> None:
    """TENANT's named storage: name, host path, mount point, mode, when and by whom set."""
    session = session_of(ctx)
    with api_errors(session):
        data = session.client.storage(tenant)
    if output is Output.json:
        print_json(data)
    else:
        render_storage(session.out, tenant, data.get("storage") or [])


@storage_app.command("rm")
def storage_rm(ctx: typer.Context, tenant: Tenant, name: Name) -> None:
    """Remove TENANT's storage NAME: queued jobs that name it fail at launch."""
    session = session_of(ctx)
    with api_errors(session):
        session.client.remove_storage(tenant, name)
    session.out.print(Text(f"removed tenant {tenant}'s storage {name}"))


storage_app.command("list", hidden=True)(storage_ls)
storage_app.command("remove", hidden=True)(storage_rm)
