"""OpenPAI job protocol v2 → our format, then the same validation as ours.

The OpenPAI document is translated into a document in our format, remembering which
OpenPAI field each of ours came from; validation errors are then reported under the
OpenPAI paths (`taskRoles.train.resourcePerInstance.gpu`, not `...gpuNumber`).
A role's `completion.minFailedInstances / minSucceededInstances` become our
`minFailedTasks / minSucceededTasks` (null, or more than the role's instances: -1, never
triggered, as on OpenPAI), its `resourcePerInstance.ports` our `ports` (with an `ssh` and an
`http` port, which OpenPAI reserves for every task), its commands one script with the active
deployment's pre/post commands and the `cmd` hooks (openpai_script.py), its `dockerImage`
its own image, its `auth` a registry login (registryauth.py). Every field is
honoured, refused, or accepted with a `FieldWarning`
(docs/spec.md has the table); `convert_openpai` returns the warnings with the spec.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuyard.spec.errors import Errors, got, item, join, unknown_field
from gpuyard.spec.fields import as_whole
from gpuyard.spec.models import SECRET_KEY, JobSpec
from gpuyard.spec.notices import FieldWarning, Warnings
from gpuyard.spec.openpai_deployments import Active, active_deployment, check_version
from gpuyard.spec.openpai_extras import Extras, read_extras
from gpuyard.spec.openpai_hooks import Scope, plugin_hooks, prerequisite_hooks
from gpuyard.spec.openpai_plugins import plugin_fields
from gpuyard.spec.openpai_script import entrypoint, script
from gpuyard.spec.openpai_storage import storage_fields
from gpuyard.spec.ours import parse_ours
from gpuyard.spec.paienv import SHM_MIN_MB
from gpuyard.spec.registryauth import check_auth
from gpuyard.spec.templates import substitute

JOB_KEYS = (
    "protocolVersion",
    "name",
    "type",
    "version",
    "contributor",
    "description",
    "prerequisites",
    "parameters",
    "secrets",
    "jobRetryCount",
    "taskRoles",
    "deployments",
    "defaults",
    "extras",
    "after",  # gpuyard's: the jobs it waits for (spec/arrays.py)
)
ROLE_KEYS = (
    "instances",
    "completion",
    "taskRetryCount",
    "dockerImage",
    "data",
    "output",
    "script",
    "extraContainerOptions",
    "resourcePerInstance",
    "commands",
    "prerequisites",
    "protocolVersion",
)
RESOURCE_KEYS = {"cpu": "cpuNumber", "memoryMB": "memoryMB", "gpu": "gpuNumber", "ports": "ports"}
COMPLETION_KEYS = {
    "minFailedInstances": "minFailedTasks",
    "minSucceededInstances": "minSucceededTasks",
}
NEVER = -1  # OpenPAI's null or -1: no count triggers
DEFAULTS_KEYS = ("virtualCluster", "deployment")
PREREQUISITE_TYPES = ("dockerimage", "data", "script", "output")
PREREQUISITE_KEYS = (
    *("protocolVersion", "name", "type", "version", "contributor", "description", "uri"),
    *("plugin", "callbacks", "require", "failurePolicy", "auth"),
)
OPENPAI_PORTS = ("http", "ssh")  # OpenPAI reserves one of each for every task
CONTAINER_OPTIONS = ("shmMB", "infiniband")


def is_openpai(doc: dict[Any, Any]) -> bool:
    return "protocolVersion" in doc


@dataclass
class _Context:
    """What the translation gathers: prerequisites, template scope, our→OpenPAI paths."""

    by_name: dict[str, dict[str, Any]] = field(default_factory=dict)
    images: dict[str, tuple[object, int]] = field(default_factory=dict)
    scope: dict[str, Any] = field(default_factory=dict)
    paths: dict[str, str] = field(default_factory=dict)
    broken: set[str] = field(default_factory=set)  # sections already reported as bad
    warns: Warnings = field(default_factory=Warnings)
    docs: list[Any] = field(default_factory=list)  # the prerequisites as given
    extras: Extras = field(default_factory=Extras)
    deployment: Active = field(default_factory=dict)

    def rename(self, path: str) -> str:
        """Our path → the OpenPAI path it came from (longest matching prefix)."""
        for ours in sorted(self.paths, key=len, reverse=True):
            rest = path[len(ours) :]
            if path.startswith(ours) and (rest == "" or rest[0] in ".["):
                return self.paths[ours] + rest
        return path


def _check_keys(errs: Errors, doc: dict[Any, Any], path: str, known: tuple[str, ...]) -> None:
    for key in doc:
        if key not in known:
            errs.add(join(path, key), unknown_field(key, known))


def _mapping(errs: Errors, ctx: _Context, doc: dict[Any, Any], key: str, what: str) -> dict:
    value = doc.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        errs.add(key, f"must be a mapping of {what}{got(value)}")
        ctx.broken.add(key)
        return {}
    return value


def _check_header(errs: Errors, doc: dict[Any, Any]) -> None:
    version = doc.get("protocolVersion")
    if version not in (2, "2"):
        message = f"must be 2 (only OpenPAI protocol v2 is supported){got(version)}"
        errs.add("protocolVersion", message)
    kind = doc.get("type")
    if kind is not None and kind != "job":
        errs.add("type", f"must be job (only jobs can be submitted){got(kind)}")


def _prerequisite_warnings(ctx: _Context, where: str, entry: dict[Any, Any]) -> None:
    for key in entry:
        if key not in PREREQUISITE_KEYS:
            ctx.warns.add(join(where, key), "unknown prerequisite field: not used")


def _check_unique(errs: Errors, ctx: _Context, where: str, kind: object, name: str) -> None:
    """Two data, script or output prerequisites of one name are refused, as OpenPAI refuses
    them (dockerimages: below)."""
    other = ctx.by_name.get(name)
    if kind != "dockerimage" and other is not None and other.get("type") == kind:
        errs.add(join(where, "name"), f"another {kind} prerequisite is already named '{name}'")


def _read_prerequisite(errs: Errors, ctx: _Context, i: int, entry: object) -> None:
    where = item("prerequisites", i)
    if not isinstance(entry, dict):
        errs.add(where, f"must be a mapping with type, name and uri{got(entry)}")
        return
    _prerequisite_warnings(ctx, where, entry)
    check_version(errs, where, entry)
    kind, name = entry.get("type"), entry.get("name")
    if kind not in PREREQUISITE_TYPES:
        errs.add(join(where, "type"), f"must be one of {', '.join(PREREQUISITE_TYPES)}{got(kind)}")
    if isinstance(name, str) and name:
        _check_unique(errs, ctx, where, kind, name)
        ctx.by_name.setdefault(name, entry)
    if kind != "dockerimage":
        return
    if not isinstance(name, str) or not name:
        message = f"must be the name that task roles use in dockerImage{got(name)}"
        errs.add(join(where, "name"), message)
    elif name in ctx.images:
        errs.add(join(where, "name"), f"another dockerimage prerequisite is already named '{name}'")
    else:
        ctx.images[name] = (entry.get("uri"), i)
    if not isinstance(entry.get("uri"), str):
        message = f"must be an image reference, like python:3.11-slim{got(entry.get('uri'))}"
        errs.add(join(where, "uri"), message)


def _read_prerequisites(errs: Errors, doc: dict[Any, Any], ctx: _Context) -> None:
    """Prerequisites by name; if any is bad, references to them are not checked (they
    would only repeat the same problem)."""
    value = doc.get("prerequisites")
    before = len(errs.items)
    if value is not None and not isinstance(value, list):
        errs.add("prerequisites", f"must be a list of {{type, name, uri}} items{got(value)}")
    elif value is not None:
        ctx.docs = value
        for i, entry in enumerate(value):
            _read_prerequisite(errs, ctx, i, entry)
    if len(errs.items) > before:
        ctx.broken.update(("prerequisites", "data", "output", "script"))


_BAD = object()  # a dockerImage that names nothing: already reported


def _role_image(errs: Errors, ctx: _Context, path: str, ref: object) -> object:
    """The image uri a role's dockerImage names; records the uri's path as image's source."""
    if ref is None:
        return None
    if not isinstance(ref, str) or ref not in ctx.images:
        if "prerequisites" in ctx.broken:
            return _BAD
        known = ", ".join(ctx.images) or "none defined"
        message = f"must name a dockerimage prerequisite ({known}){got(ref)}"
        errs.add(join(path, "dockerImage"), message)
        return _BAD
    uri, index = ctx.images[ref]
    ctx.paths.setdefault("image", f"prerequisites[{index}].uri")
    ctx.paths[join(path, "image")] = f"prerequisites[{index}].uri"
    return uri


def _image_words(uri: object) -> str:
    return "no image" if uri is None else f"image {uri!r}"


def _scope(ctx: _Context, role: dict[Any, Any]) -> Scope:
    """What the role's references resolve to: parameters, secrets, its data/output/script."""
    values = dict(ctx.scope)
    for kind in ("data", "output", "script"):
        values[kind] = ctx.by_name.get(role[kind]) if isinstance(role.get(kind), str) else None
    return Scope(values, ctx.broken)


def _lines(errs: Errors, scope: Scope, where: str, value: list[Any]) -> list[Any]:
    return [
        substitute(errs, item(where, i), line, scope.values, scope.quiet, scope.used)
        if isinstance(line, str)
        else line
        for i, line in enumerate(value)
    ]


def _chain(errs: Errors, ctx: _Context, name: str, role: dict, scope: Scope) -> object:
    """The role's commands with the active deployment's pre/post commands, substituted;
    a list with a bad line is given back as it is, for our validation to name the line."""
    value = role.get("commands")
    where = join(join("taskRoles", name), "commands")
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        return role.get("commands")
    lines = _lines(errs, scope, where, value)
    if not all(isinstance(line, str) for line in lines):
        return lines
    path, extra = ctx.deployment.get(name, ("", {}))
    pre = _lines(errs, scope, join(path, "preCommands"), extra.get("preCommands") or [])
    post = _lines(errs, scope, join(path, "postCommands"), extra.get("postCommands") or [])
    return entrypoint([*pre, *lines, *post])


def _commands(errs: Errors, ctx: _Context, name: str, role: dict[Any, Any]) -> object:
    """The role's script (openpai_script.py); secret as a whole if it holds a secret."""
    scope = _scope(ctx, role)
    chain = _chain(errs, ctx, name, role, scope)
    if not isinstance(chain, str):
        return chain
    path = join("taskRoles", name)
    plugins = plugin_hooks(errs, scope, ctx.extras.plugins, name)
    needs = prerequisite_hooks(errs, ctx.warns, scope, path, role, ctx.docs)
    text = script(chain, needs.before + plugins.before, plugins.after + needs.after)
    # a command that holds a secret's value is itself secret (stored encrypted, redacted)
    return {SECRET_KEY: text} if "secrets" in scope.used else text


def _with_openpai_ports(value: object) -> object:
    """`ports` with one `http` and one `ssh` port added where not given, as OpenPAI does
    (PAI_TASK_ROLE_<role>_HOST_LIST names each task's http port); a label given 0 ports (as
    OpenPAI's own examples do) reserves none."""
    if value is None:
        value = {}
    if not isinstance(value, dict):
        return value  # our validation names the problem
    added = {label: 1 for label in OPENPAI_PORTS if label not in value}
    return {k: v for k, v in {**value, **added}.items() if as_whole(v) != 0}


def _resources(errs: Errors, ctx: _Context, path: str, value: object) -> dict[str, Any]:
    where = join(path, "resourcePerInstance")
    if value is None:
        return {"ports": _with_openpai_ports(None)}
    if not isinstance(value, dict):
        errs.add(where, f"must be a mapping with cpu, memoryMB and gpu{got(value)}")
        return {}
    _check_keys(errs, value, where, tuple(RESOURCE_KEYS))
    out: dict[str, Any] = {}
    for key, ours in RESOURCE_KEYS.items():
        if ours is not None and key in value:
            out[ours] = value[key]
            ctx.paths[join(path, ours)] = join(where, key)
    out["ports"] = _with_openpai_ports(out.get("ports"))
    return out


def _completion(errs: Errors, ctx: _Context, path: str, role: dict[Any, Any]) -> dict[str, Any]:
    """minFailed/minSucceeded: null, or more than the role's instances (never reached, so
    OpenPAI never triggers it), become -1."""
    where, value = join(path, "completion"), role.get("completion")
    if value is None:
        return {}
    if not isinstance(value, dict):
        what = "a mapping with minFailedInstances and minSucceededInstances"
        errs.add(where, f"must be {what}{got(value)}")
        return {}
    _check_keys(errs, value, where, tuple(COMPLETION_KEYS))
    instances = as_whole(role.get("instances", 1))
    out: dict[str, Any] = {}
    for key, ours in COMPLETION_KEYS.items():
        if key in value:
            count = as_whole(value[key])
            beyond = count is not None and instances is not None and count > instances
            out[ours] = NEVER if value[key] is None or beyond else value[key]
            ctx.paths[join(path, ours)] = join(where, key)
    return out


def _container_options(ctx: _Context, path: str, role: dict[Any, Any]) -> None:
    """extraContainerOptions: shmMB is met (a task's /dev/shm is as large as its memory);
    one larger than that, infiniband and unknown options are warnings."""
    where, value = join(path, "extraContainerOptions"), role.get("extraContainerOptions")
    if not isinstance(value, dict):
        if value is not None:
            ctx.warns.add(where, f"not used: must be a mapping like {{shmMB: 512}}{got(value)}")
        return
    resources = role.get("resourcePerInstance")
    memory = as_whole(resources.get("memoryMB", 1024)) if isinstance(resources, dict) else None
    shm, size = as_whole(value.get("shmMB")), max(SHM_MIN_MB, memory or 0)
    if shm is not None and shm > size:
        ctx.warns.add(join(where, "shmMB"), f"/dev/shm is {size} MB here (the task's memory)")
    if value.get("infiniband"):
        ctx.warns.add(join(where, "infiniband"), "no InfiniBand devices are given to tasks yet")
    for key in value:
        if key not in CONTAINER_OPTIONS:
            ctx.warns.add(join(where, key), "unknown container option: not used")


def _task_retries(ctx: _Context, path: str, role: dict[Any, Any], doc: dict[Any, Any]) -> None:
    """taskRetryCount counts only without gang allocation (as on OpenPAI)."""
    extras = doc.get("extras")
    ungang = isinstance(extras, dict) and extras.get("gangAllocation") is False
    if ungang and role.get("taskRetryCount"):
        message = "not honoured yet: a failed task counts against the job's jobRetryCount"
        ctx.warns.add(join(path, "taskRetryCount"), message)


def _translate_role(errs: Errors, ctx: _Context, name: str, role: object, doc: dict) -> object:
    path = join("taskRoles", name)
    if not isinstance(role, dict):
        return role  # our validation says that a role must be a mapping
    _check_keys(errs, role, path, ROLE_KEYS)
    check_version(errs, path, role)
    _container_options(ctx, path, role)
    _task_retries(ctx, path, role, doc)
    out = _resources(errs, ctx, path, role.get("resourcePerInstance"))
    out.update(_completion(errs, ctx, path, role))
    if "instances" in role:
        out["taskNumber"] = role["instances"]
    if name in ctx.extras.gpu_types:
        out["gpuType"], ctx.paths[join(path, "gpuType")] = ctx.extras.gpu_types[name]
    out["command"] = _commands(errs, ctx, name, role)
    ctx.paths[join(path, "taskNumber")] = join(path, "instances")
    ctx.paths[join(path, "command")] = join(path, "commands")
    return out


def _role_images(errs: Errors, ctx: _Context, roles: dict[Any, Any]) -> dict[str, object]:
    """Each role's image (the uri its dockerImage names); an error for a role without one
    when another has one (OpenPAI requires it: no image at all is our host root fs)."""
    images: dict[str, object] = {}
    for name, role in roles.items():
        if isinstance(role, dict):
            path = join("taskRoles", name)
            images[str(name)] = _role_image(errs, ctx, path, role.get("dockerImage"))
    given = [(name, uri) for name, uri in images.items() if uri is not None]
    for name, uri in images.items():
        if uri is None and given:
            errs.add(
                join(join("taskRoles", name), "dockerImage"),
                f"uses {_image_words(uri)} but role '{given[0][0]}' uses "
                f"{_image_words(given[0][1])}: name a dockerimage prerequisite for every role",
            )
    return images


def _place_images(ours: dict[str, Any], images: dict[str, object]) -> None:
    """The first role's image is the job's; a role with another image gets its own."""
    first = next(iter(images.values()), None)
    ours["image"] = None if first is _BAD else first
    for name, uri in images.items():
        role = ours["taskRoles"].get(name)
        if isinstance(role, dict) and uri is not _BAD and uri is not None and uri != first:
            role["image"] = uri


def _translate(errs: Errors, doc: dict[Any, Any], ctx: _Context) -> dict[str, Any]:
    ours: dict[str, Any] = {"name": doc.get("name"), "retryCount": doc.get("jobRetryCount")}
    if doc.get("after") is not None:
        ours["after"] = doc["after"]
    ctx.paths.update(retryCount="jobRetryCount", tenant="defaults.virtualCluster")
    defaults = _mapping(errs, ctx, doc, "defaults", "defaults (virtualCluster, deployment)")
    _check_keys(errs, defaults, "defaults", DEFAULTS_KEYS)
    ours["tenant"] = defaults.get("virtualCluster")
    if ctx.extras.priority_class is not None:  # HiveD's jobPriorityClass (openpai_extras.py)
        ours["priorityClass"] = ctx.extras.priority_class.value
    extras = doc.get("extras")
    if isinstance(extras, dict) and "gangAllocation" in extras:  # our `gang`
        ours["gang"], ctx.paths["gang"] = extras["gangAllocation"], "extras.gangAllocation"
    roles = doc.get("taskRoles")
    if not isinstance(roles, dict):
        ours["taskRoles"] = roles
        return ours
    images = _role_images(errs, ctx, roles)
    ours["taskRoles"] = {
        name: _translate_role(errs, ctx, name, role, doc) for name, role in roles.items()
    }
    _place_images(ours, images)
    ours.update(plugin_fields(errs, ctx.warns, doc, ctx.paths))  # ssh
    ours.update(storage_fields(errs, ctx.warns, doc, ctx.paths))  # teamwise_storage
    return ours


def convert_openpai(doc: dict[Any, Any]) -> tuple[JobSpec, list[FieldWarning]]:
    """Validate an OpenPAI v2 job; raise `SpecError` with OpenPAI paths. Also gives the
    warnings: fields accepted but not honoured (yet)."""
    errs = Errors()
    ctx = _Context()
    _check_keys(errs, doc, "", JOB_KEYS)
    _check_header(errs, doc)
    _read_prerequisites(errs, doc, ctx)
    ctx.scope["parameters"] = _mapping(errs, ctx, doc, "parameters", "parameter names to values")
    ctx.scope["secrets"] = _mapping(errs, ctx, doc, "secrets", "secret names to values")
    check_auth(errs, ctx.warns, doc, ctx.scope, ctx.broken)  # logins: checked, never in the spec
    ctx.extras = read_extras(errs, ctx.warns, doc)
    ctx.deployment = active_deployment(errs, ctx.warns, doc)
    ours = _translate(errs, doc, ctx)
    errs.rename = ctx.rename  # from here on, paths are ours: report them as OpenPAI's
    return parse_ours(ours, errs), ctx.warns.items


def parse_openpai(doc: dict[Any, Any]) -> JobSpec:
    """Validate an OpenPAI v2 job; raise `SpecError` with OpenPAI paths."""
    return convert_openpai(doc)[0]
