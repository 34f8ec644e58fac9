"""`gpuyard admin …`: tenants, users, members, tokens, nodes and registry logins (platform and
tenant admins).

    gpuyard admin tenant create vision --gpus A100-80GB:8 --borrowing-limit 4 \\
        --weight 2 --policy las --storage-root /mnt/nfs/vision
    gpuyard admin tenant update vision --lending-limit A100-80GB:2
    gpuyard admin tenant list
    gpuyard admin user create alice --tenant vision --tenant nlp:viewer
    gpuyard admin token create alice --name laptop
    gpuyard admin member add vision bob --role tenant-admin
    gpuyard admin node drain gpu-7 --deadline 2h   (admin_nodes.py)
    gpuyard admin registry set vision registry.lan:5000 -u bot --password-stdin
                                                   (admin_registries.py)
    gpuyard admin storage set vision datasets /mnt/nfs/vision/datasets   (admin_storage.py)

Tenant options map to the tenant's fields (docs/api.md); `--set FIELD=VALUE` sets any other
field by its API name (the value is read as JSON when it parses, else as a string).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.text import Text

from gpuyard.cli.admin_leader import leader
from gpuyard.cli.admin_nodes import node_app
from gpuyard.cli.admin_registries import registry_app
from gpuyard.cli.admin_storage import storage_app
from gpuyard.cli.basics import print_json
from gpuyard.cli.notify import mail_app
from gpuyard.cli.render_admin import (
    render_members,
    render_new_token,
    render_tenants,
    render_user,
)
from gpuyard.cli.session import Output, api_errors, session_of

TENANT_ROLES = ("tenant-admin", "member", "viewer")

admin_app = typer.Typer(
    help="Administer tenants, users, members, tokens, nodes and registry logins.",
    no_args_is_help=True,
)
tenant_app = typer.Typer(help="Create, update and list tenants.", no_args_is_help=True)
user_app = typer.Typer(help="Create and list users.", no_args_is_help=True)
token_app = typer.Typer(help="Make API tokens.", no_args_is_help=True)
member_app = typer.Typer(help="Manage the members of a tenant.", no_args_is_help=True)
admin_app.add_typer(tenant_app, name="tenant")
admin_app.add_typer(user_app, name="user")
admin_app.add_typer(token_app, name="token")
admin_app.add_typer(member_app, name="member")
admin_app.add_typer(node_app, name="node")
admin_app.add_typer(registry_app, name="registry")  # tenants' registry logins
admin_app.add_typer(storage_app, name="storage")  # tenants' named storage (admin_storage.py)
admin_app.add_typer(mail_app, name="mail")  # the SMTP relay (gpuyard.cli.notify)
admin_app.command("leader")(leader)  # which server leads (admin_leader.py, docs/ha.md)


# -- pure helpers (tested directly) ----------------------------------------------------


def parse_count(value: str, flavor_required: bool) -> tuple[str | None, int]:
    """`A100-80GB:4` → ("A100-80GB", 4); `4` → (None, 4) when a flavor is optional."""
    flavor, sep, count = value.rpartition(":")
    if not sep and flavor_required:
        raise typer.BadParameter(f"{value!r} is not FLAVOR:COUNT (for example A100-80GB:4)")
    try:
        number = int(count)
    except ValueError:
        raise typer.BadParameter(f"{value!r}: {count!r} is not a whole number") from None
    if number < 0 or (sep and not flavor):
        raise typer.BadParameter(f"{value!r} is not [FLAVOR:]COUNT with COUNT ≥ 0")
    return (flavor or None), number


def parse_membership(value: str) -> dict[str, str]:
    """`vision` → member of vision; `vision:viewer` → viewer of vision."""
    tenant, _, role = value.partition(":")
    role = role or "member"
    if not tenant or role not in TENANT_ROLES:
        raise typer.BadParameter(
            f"{value!r} is not TENANT[:ROLE] with ROLE one of {', '.join(TENANT_ROLES)}"
        )
    return {"tenant": tenant, "role": role}


def parse_setting(value: str) -> tuple[str, Any]:
    """`maxGpusPerUser=8` → ("maxGpusPerUser", 8); non-JSON values stay strings."""
    key, sep, raw = value.partition("=")
    if not sep or not key:
        raise typer.BadParameter(f"{value!r} is not FIELD=VALUE")
    try:
        return key, json.loads(raw)
    except ValueError:
        return key, raw


def apply_limits(quotas: list[dict[str, Any]], values: list[str], key: str) -> list[dict[str, Any]]:
    """Set `borrowingLimit` / `lendingLimit` (`key`) from `[FLAVOR:]N` values on the quotas."""
    out = [dict(q) for q in quotas]
    for value in values:
        flavor, number = parse_count(value, flavor_required=False)
        chosen = [q for q in out if flavor is None or q.get("flavor") == flavor]
        if not chosen:
            raise typer.BadParameter(f"{value!r}: the tenant has no quota of flavor {flavor}")
        for q in chosen:
            q[key] = number
    return out


def apply_gpu_memory(quotas: list[dict[str, Any]], values: list[str]) -> list[dict[str, Any]]:
    """Set `gpuMemoryMB` (guaranteed GPU memory for shared-GPU tasks) from `FLAVOR:MB`
    values; a flavor without a quota gets one of 0 GPUs (docs/gpu-sharing.md)."""
    out = [dict(q) for q in quotas]
    for value in values:
        flavor, number = parse_count(value, flavor_required=True)
        chosen = [q for q in out if q.get("flavor") == flavor]
        if not chosen:
            chosen = [{"flavor": flavor, "guaranteed": 0}]
            out += chosen
        chosen[0]["gpuMemoryMB"] = number
    return out


def tenant_body(
    current_quotas: list[dict[str, Any]] | None,
    gpus: list[str],
    borrowing: list[str],
    lending: list[str],
    fields: dict[str, Any],
    settings: list[str],
    gpu_memory: list[str] | None = None,
) -> dict[str, Any]:
    """The JSON body for create (current_quotas None) or update from the CLI options."""
    body = {k: v for k, v in fields.items() if v is not None}
    if gpus:
        quotas = []
        for value in gpus:
            flavor, number = parse_count(value, flavor_required=True)
            quotas.append({"flavor": flavor, "guaranteed": number})
    else:
        quotas = list(current_quotas or [])
    if gpus or borrowing or lending or gpu_memory:
        quotas = apply_gpu_memory(quotas, gpu_memory or [])
        quotas = apply_limits(quotas, borrowing, "borrowingLimit")
        body["quotas"] = apply_limits(quotas, lending, "lendingLimit")
    body.update(parse_setting(s) for s in settings)
    return body


# -- tenant options, shared by create and update ---------------------------------------

Gpus = Annotated[
    list[str] | None,
    typer.Option(
        "--gpus",
        metavar="FLAVOR:N",
        help="Guaranteed GPUs of a flavor (repeatable); replaces the quotas on update.",
    ),
]
Borrowing = Annotated[
    list[str] | None,
    typer.Option(
        "--borrowing-limit",
        metavar="[FLAVOR:]N",
        help="At most N GPUs above the guarantee (of FLAVOR, or of every flavor).",
    ),
]
Lending = Annotated[
    list[str] | None,
    typer.Option(
        "--lending-limit",
        metavar="[FLAVOR:]N",
        help="At most N unused guaranteed GPUs lent to others.",
    ),
]
GpuMemory = Annotated[
    list[str] | None,
    typer.Option(
        "--gpu-memory",
        metavar="FLAVOR:MB",
        help="Guaranteed GPU memory of a flavor for shared-GPU tasks, MB (repeatable).",
    ),
]
Weight = Annotated[float | None, typer.Option("--weight", help="Fair-share weight.")]
Policy = Annotated[
    str | None, typer.Option("--policy", help="Queue order inside the tenant: fifo or las.")
]
Roots = Annotated[
    list[str] | None,
    typer.Option(
        "--storage-root",
        metavar="PATH",
        help="A dir jobs may use as dataDir/outputDir (repeatable); replaces the list on update.",
    ),
]
Cpu = Annotated[float | None, typer.Option("--cpu", help="Guaranteed CPU cores.")]
Memory = Annotated[int | None, typer.Option("--memory-mb", help="Guaranteed memory, MB.")]
MaxGpus = Annotated[int | None, typer.Option("--max-gpus-per-user")]
MaxJobs = Annotated[int | None, typer.Option("--max-running-jobs-per-user")]
Budget = Annotated[float | None, typer.Option("--gpu-hour-budget", help="GPU-hours per period.")]
Period = Annotated[str | None, typer.Option("--budget-period", help="day, week or month.")]
Grace = Annotated[
    int | None,
    typer.Option("--preemption-grace", help="Seconds from SIGTERM to SIGKILL when preempted."),
]
PriorityPreemption = Annotated[
    bool | None,
    typer.Option(
        "--priority-preemption/--no-priority-preemption",
        help="May a higher-priority job of the tenant preempt a lower one?",
    ),
]
AllowRoot = Annotated[
    bool | None,
    typer.Option(
        "--allow-root/--no-allow-root",
        help="Run tasks as the host's root, without a user namespace (image tasks are root in "
        "their own namespace anyway)",
    ),
]
PrivateHooks = Annotated[
    bool | None,
    typer.Option(
        "--allow-private-webhooks/--no-allow-private-webhooks",
        help="May the tenant's webhooks reach loopback, link-local and private addresses?",
    ),
]
Internet = Annotated[
    bool | None,
    typer.Option(
        "--allow-internet/--no-allow-internet",
        help="May the tenant's tasks reach beyond the cluster (never its nodes or metadata)?",
    ),
]
HostNetwork = Annotated[
    bool | None,
    typer.Option(
        "--allow-host-network/--no-allow-host-network",
        help="May the tenant's jobs run in the node's network (hostNetwork: true)?",
    ),
]
Settings = Annotated[
    list[str] | None,
    typer.Option(
        "--set", metavar="FIELD=VALUE", help="Any tenant field by its API name (repeatable)."
    ),
]
OutputOpt = Annotated[Output, typer.Option("--output", "-o")]


# tenant settings options (their parameter names) → the API's field names
TENANT_OPTIONS = {
    "weight": "weight",
    "policy": "queuePolicy",
    "memory_mb": "memoryMB",
    "max_gpus_per_user": "maxGpusPerUser",
    "max_running_jobs_per_user": "maxRunningJobsPerUser",
    "gpu_hour_budget": "gpuHourBudget",
    "budget_period": "budgetPeriod",
    "preemption_grace": "preemptionGraceS",
    "priority_preemption": "priorityPreemption",
    "allow_root": "allowRoot",
    "allow_private_webhooks": "allowPrivateWebhooks",
    "allow_internet": "allowInternet",
    "allow_host_network": "allowHostNetwork",
}


def tenant_fields(params: dict[str, Any]) -> dict[str, Any]:
    """The tenant settings given on the command line (`ctx.params`), in the API's names."""
    cpu = params.get("cpu")
    return {
        **{api: params.get(option) for option, api in TENANT_OPTIONS.items()},
        "storageRoots": params.get("storage_root") or None,
        "cpuMilli": round(cpu * 1000) if cpu is not None else None,
    }


@tenant_app.command("create")
def tenant_create(
    ctx: typer.Context,
    name: str,
    gpus: Gpus = None,
    borrowing_limit: Borrowing = None,
    lending_limit: Lending = None,
    gpu_memory: GpuMemory = None,
    weight: Weight = None,
    policy: Policy = None,
    storage_root: Roots = None,
    cpu: Cpu = None,
    memory_mb: Memory = None,
    max_gpus_per_user: MaxGpus = None,
    max_running_jobs_per_user: MaxJobs = None,
    gpu_hour_budget: Budget = None,
    budget_period: Period = None,
    preemption_grace: Grace = None,
    priority_preemption: PriorityPreemption = None,
    allow_root: AllowRoot = None,
    allow_private_webhooks: PrivateHooks = None,
    allow_internet: Internet = None,
    allow_host_network: HostNetwork = None,
    set_: Settings = None,
    output: OutputOpt = Output.table,
) -> None:
    """Create a tenant (platform admin)."""
    session = session_of(ctx)
    fields = tenant_fields(ctx.params)
    body = {
        "name": name,
        **tenant_body(
            None,
            gpus or [],
            borrowing_limit or [],
            lending_limit or [],
            fields,
            set_ or [],
            gpu_memory,
        ),
    }
    with api_errors(session):
        tenant = session.client.create_tenant(body)
    show_tenant(session, tenant, output, "created")


@tenant_app.command("update")
def tenant_update(
    ctx: typer.Context,
    name: str,
    gpus: Gpus = None,
    borrowing_limit: Borrowing = None,
    lending_limit: Lending = None,
    gpu_memory: GpuMemory = None,
    weight: Weight = None,
    policy: Policy = None,
    storage_root: Roots = None,
    cpu: Cpu = None,
    memory_mb: Memory = None,
    max_gpus_per_user: MaxGpus = None,
    max_running_jobs_per_user: MaxJobs = None,
    gpu_hour_budget: Budget = None,
    budget_period: Period = None,
    preemption_grace: Grace = None,
    priority_preemption: PriorityPreemption = None,
    allow_root: AllowRoot = None,
    allow_private_webhooks: PrivateHooks = None,
    allow_internet: Internet = None,
    allow_host_network: HostNetwork = None,
    set_: Settings = None,
    output: OutputOpt = Output.table,
) -> None:
    """Change some fields of a tenant (platform admin); the others keep their values."""
    session = session_of(ctx)
    fields = tenant_fields(ctx.params)
    with api_errors(session):
        merge = borrowing_limit or lending_limit or gpu_memory
        current = session.client.get_tenant(name) if merge else {}
        body = tenant_body(
            current.get("quotas"),
            gpus or [],
            borrowing_limit or [],
            lending_limit or [],
            fields,
            set_ or [],
            gpu_memory,
        )
        tenant = session.client.update_tenant(name, body)
    show_tenant(session, tenant, output, "updated")


def show_tenant(session, tenant: dict[str, Any], output: Output, verb: str) -> None:
    if output is Output.json:
        print_json(tenant)
        return
    session.err.print(Text(f"{verb} tenant {tenant.get('name')}"))
    render_tenants(session.out, [tenant])


@tenant_app.command("list")
def tenant_list(ctx: typer.Context, output: OutputOpt = Output.table) -> None:
    """The tenants you belong to (all of them for a platform admin)."""
    session = session_of(ctx)
    with api_errors(session):
        data = session.client.list_tenants()
    if output is Output.json:
        print_json(data)
    else:
        render_tenants(session.out, data.get("tenants") or [])


# -- users, tokens, members -------------------------------------------------------------


@user_app.command("create")
def user_create(
    ctx: typer.Context,
    name: str,
    admin: Annotated[bool, typer.Option("--admin", help="Make a platform admin.")] = False,
    tenant: Annotated[
        list[str] | None,
        typer.Option(
            "--tenant",
            metavar="TENANT[:ROLE]",
            help="A membership (repeatable); ROLE: tenant-admin, member (default) or viewer.",
        ),
    ] = None,
    output: OutputOpt = Output.table,
) -> None:
    """Create a user (platform admin); then `gpuyard admin token create NAME`."""
    session = session_of(ctx)
    body = {
        "name": name,
        "admin": admin,
        "memberships": [parse_membership(t) for t in tenant or []],
    }
    with api_errors(session):
        user = session.client.create_user(body)
    if output is Output.json:
        print_json(user)
        return
    render_user(session.out, user)
    session.err.print(Text(f"next: gpuyard admin token create {name}", style="dim"))


@user_app.command("list")
def user_list(ctx: typer.Context, output: OutputOpt = Output.table) -> None:
    """Every user (platform admin)."""
    session = session_of(ctx)
    with api_errors(session):
        data = session.client.list_users()
    if output is Output.json:
        print_json(data)
        return
    for user in data.get("users") or []:
        render_user(session.out, user)


@token_app.command("create")
def token_create(
    ctx: typer.Context,
    user: str,
    name: Annotated[str, typer.Option("--name", help="What the token is for.")] = "cli",
    expires_in_days: Annotated[
        float | None,
        typer.Option(
            "--expires-in-days", min=0.001, help="Make it stop working after this many days."
        ),
    ] = None,
) -> None:
    """Make an API token for USER (platform admin, or USER for themselves); shown once."""
    session = session_of(ctx)
    with api_errors(session):
        made = session.client.create_token(user, name, expires_in_days)
    render_new_token(session.out, session.err, made)


@member_app.command("add")
def member_add(
    ctx: typer.Context,
    tenant: str,
    user: str,
    role: Annotated[str, typer.Option("--role", help="tenant-admin, member or viewer.")] = "member",
) -> None:
    """Add USER to TENANT, or change their role (tenant admin or platform admin)."""
    session = session_of(ctx)
    parse_membership(f"{tenant}:{role}")
    with api_errors(session):
        session.client.set_member(tenant, user, role)
    session.out.print(Text(f"{user} is now {role} of tenant {tenant}"))


@member_app.command("remove")
def member_remove(ctx: typer.Context, tenant: str, user: str) -> None:
    """Remove USER from TENANT (tenant admin or platform admin)."""
    session = session_of(ctx)
    with api_errors(session):
        session.client.remove_member(tenant, user)
    session.out.print(Text(f"{user} is no longer a member of tenant {tenant}"))


@member_app.command("list")
def member_list(ctx: typer.Context, tenant: str, output: OutputOpt = Output.table) -> None:
    """The members of TENANT and their roles."""
    session = session_of(ctx)
    with api_errors(session):
        data = session.client.list_members(tenant)
    if output is Output.json:
        print_json(data)
    else:
        render_members(session.out, tenant, data.get("members") or [])
