"""OpenPAI job protocol v2 → our format, then the same validation as ours.

The OpenPAI document is translated into a document in our format, remembering which
OpenPAI field each of ours came from; validation errors are then reported under the
OpenPAI paths (`taskRoles.train.resourcePerInstance.gpu`, not `...gpuNumber`).
A role's `completion.minFailedInstances / minSucceededInstances` become our
`minFailedTasks / minSucceededTasks` (null: -1), its `resourcePerInstance.ports` our `ports`.
Fields that have no meaning here (taskRetryCount, extraContainerOptions, data/script/output
prerequisites, deployments, extras) are accepted and ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuyard.spec.errors import Errors, got, item, join, unknown_field
from gpuyard.spec.models import SECRET_KEY, JobSpec
from gpuyard.spec.ours import parse_ours
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
)
RESOURCE_KEYS = {"cpu": "cpuNumber", "memoryMB": "memoryMB", "gpu": "gpuNumber", "ports": "ports"}
COMPLETION_KEYS = {
    "minFailedInstances": "minFailedTasks",
    "minSucceededInstances": "minSucceededTasks",
}
NEVER = -1  # OpenPAI's null or -1: no count triggers
DEFAULTS_KEYS = ("virtualCluster", "deployment")
PREREQUISITE_TYPES = ("dockerimage", "data", "script", "output")


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


def _read_prerequisite(errs: Errors, ctx: _Context, i: int, entry: object) -> None:
    where = item("prerequisites", i)
    if not isinstance(entry, dict):
        errs.add(where, f"must be a mapping with type, name and uri{got(entry)}")
        return
    kind, name = entry.get("type"), entry.get("name")
    if kind not in PREREQUISITE_TYPES:
        errs.add(join(where, "type"), f"must be one of {', '.join(PREREQUISITE_TYPES)}{got(kind)}")
    if isinstance(name, str) and name:
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
    return uri


def _image_words(uri: object) -> str:
    return "no image" if uri is None else f"image {uri!r}"


def _commands(errs: Errors, ctx: _Context, path: str, role: dict[Any, Any]) -> object:
    scope = dict(ctx.scope)
    for kind in ("data", "output", "script"):
        scope[kind] = ctx.by_name.get(role[kind]) if isinstance(role.get(kind), str) else None
    value = role.get("commands")
    where = join(path, "commands")
    quiet, used = ctx.broken, set[str]()
    if isinstance(value, str):
        value = substitute(errs, where, value, scope, quiet, used)
    elif isinstance(value, list):
        value = [
            substitute(errs, item(where, i), line, scope, quiet, used)
            if isinstance(line, str)
            else line
            for i, line in enumerate(value)
        ]
    # a command that holds a secret's value is itself secret (stored encrypted, redacted)
    return {SECRET_KEY: value} if "secrets" in used else value


def _resources(errs: Errors, ctx: _Context, path: str, value: object) -> dict[str, Any]:
    where = join(path, "resourcePerInstance")
    if value is None:
        return {}
    if not isinstance(value, dict):
        errs.add(where, f"must be a mapping with cpu, memoryMB and gpu{got(value)}")
        return {}
    _check_keys(errs, value, where, tuple(RESOURCE_KEYS))
    out: dict[str, Any] = {}
    for key, ours in RESOURCE_KEYS.items():
        if ours is not None and key in value:
            out[ours] = value[key]
            ctx.paths[join(path, ours)] = join(where, key)
    return out


def _completion(errs: Errors, ctx: _Context, path: str, value: object) -> dict[str, Any]:
    where = join(path, "completion")
    if value is None:
        return {}
    if not isinstance(value, dict):
        what = "a mapping with minFailedInstances and minSucceededInstances"
        errs.add(where, f"must be {what}{got(value)}")
        return {}
    _check_keys(errs, value, where, tuple(COMPLETION_KEYS))
    out: dict[str, Any] = {}
    for key, ours in COMPLETION_KEYS.items():
        if key in value:
            out[ours] = NEVER if value[key] is None else value[key]
            ctx.paths[join(path, ours)] = join(where, key)
    return out


def _translate_role(errs: Errors, ctx: _Context, path: str, role: object) -> object:
    if not isinstance(role, dict):
        return role  # our validation says that a role must be a mapping
    _check_keys(errs, role, path, ROLE_KEYS)
    out = _resources(errs, ctx, path, role.get("resourcePerInstance"))
    out.update(_completion(errs, ctx, path, role.get("completion")))
    if "instances" in role:
        out["taskNumber"] = role["instances"]
    out["command"] = _commands(errs, ctx, path, role)
    ctx.paths[join(path, "taskNumber")] = join(path, "instances")
    ctx.paths[join(path, "command")] = join(path, "commands")
    return out


def _check_one_image(errs: Errors, ctx: _Context, roles: dict[Any, Any]) -> object:
    """The first role's image; an error for each role that names a different one."""
    first: tuple[object, object] | None = None  # (role name, its image)
    for name, role in roles.items():
        if not isinstance(role, dict):
            continue
        path = join("taskRoles", name)
        uri = _role_image(errs, ctx, path, role.get("dockerImage"))
        if first is None:
            first = (name, uri)
        elif uri is not _BAD and first[1] is not _BAD and uri != first[1]:
            errs.add(
                join(path, "dockerImage"),
                f"uses {_image_words(uri)} but role '{first[0]}' uses {_image_words(first[1])}:"
                " every role must use the same image (images per role are not supported yet)",
            )
    image = first[1] if first is not None else None
    return None if image is _BAD else image


def _translate(errs: Errors, doc: dict[Any, Any], ctx: _Context) -> dict[str, Any]:
    ours: dict[str, Any] = {"name": doc.get("name"), "retryCount": doc.get("jobRetryCount")}
    ctx.paths.update(retryCount="jobRetryCount", tenant="defaults.virtualCluster")
    defaults = _mapping(errs, ctx, doc, "defaults", "defaults (virtualCluster, deployment)")
    _check_keys(errs, defaults, "defaults", DEFAULTS_KEYS)
    ours["tenant"] = defaults.get("virtualCluster")
    roles = doc.get("taskRoles")
    if not isinstance(roles, dict):
        ours["taskRoles"] = roles
        return ours
    ours["image"] = _check_one_image(errs, ctx, roles)
    ours["taskRoles"] = {
        name: _translate_role(errs, ctx, join("taskRoles", name), role)
        for name, role in roles.items()
    }
    return ours


def parse_openpai(doc: dict[Any, Any]) -> JobSpec:
    """Validate an OpenPAI v2 job; raise `SpecError` with OpenPAI paths."""
    errs = Errors()
    ctx = _Context()
    _check_keys(errs, doc, "", JOB_KEYS)
    _check_header(errs, doc)
    _read_prerequisites(errs, doc, ctx)
    ctx.scope["parameters"] = _mapping(errs, ctx, doc, "parameters", "parameter names to values")
    ctx.scope["secrets"] = _mapping(errs, ctx, doc, "secrets", "secret names to values")
    ours = _translate(errs, doc, ctx)
    errs.rename = ctx.rename  # from here on, paths are ours: report them as OpenPAI's
    return parse_ours(ours, errs)
